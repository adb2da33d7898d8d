"""Our packages' imports, read from the source with `ast` (standard library only).

Every import statement counts, function-local and `if TYPE_CHECKING:` ones included, and so do
`__import__`/`importlib.import_module` calls with a literal name; each is marked `lazy` when it
does not run as its module loads (in a function, a lambda, or under TYPE_CHECKING). An import names
the most specific file it loads: `from a.b import c` is `a/b/c.py` when that module exists, else
`a/b/__init__.py` (or `a/b.py`), whose name `c` is.

A string that is a whole entry point reference, `"a.b:c"` (what an entry point, a plugin option or
`pkgutil.resolve_name` loads later), is a lazy import of `a.b` in the import graph: hiding a
dependency in a string does not take it out of the layers. `imports` (which tests/test_extras.py
reads for third-party dependencies) leaves them out, as a third-party `"x:y"` string is no dependency
to declare; `string_imports` has them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_ENTRY_RE = re.compile(rf"({_NAME}):{_NAME}")


@dataclass(frozen=True)
class Import:
    source: str  # the module named, relative imports resolved
    name: str | None  # what `from source import name` takes; None for `import source`
    lazy: bool  # runs only when called (in a function) or never (TYPE_CHECKING)


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the packages (namespace folders too)."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _dynamic_import(node: ast.Call) -> str | None:
    func = node.func
    named = (isinstance(func, ast.Name) and func.id == "__import__") or (
        isinstance(func, ast.Attribute) and func.attr == "import_module"
    )
    if named and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Collector(ast.NodeVisitor):
    def __init__(self, package: list[str], path: Path) -> None:
        self.package, self.path = package, path
        self.found: list[Import] = []
        self.entries: list[Import] = []  # "module:attribute" strings, loaded when something asks
        self.depth = 0  # > 0: inside a function, a lambda or a TYPE_CHECKING block

    def _nested(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _nested

    def visit_If(self, node: ast.If) -> None:
        if not _type_checking(node.test):
            self.generic_visit(node)
            return
        self.depth += 1
        for child in node.body:
            self.visit(child)
        self.depth -= 1
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [Import(alias.name, None, self.depth > 0) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            if node.level - 1 > len(self.package):
                raise ValueError(f"{self.path}:{node.lineno}: relative import beyond the top package")
            base = self.package[: len(self.package) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        self.found += [Import(source, alias.name, self.depth > 0) for alias in node.names]

    def visit_Constant(self, node: ast.Constant) -> None:
        entry = _ENTRY_RE.fullmatch(node.value) if isinstance(node.value, str) else None
        if entry:
            self.entries.append(Import(entry.group(1), None, True))

    def visit_Call(self, node: ast.Call) -> None:
        name = _dynamic_import(node)
        if name:
            self.found.append(Import(name, None, self.depth > 0))
        self.generic_visit(node)


def _collected(module: str, path: Path) -> _Collector:
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    collector = _Collector(package, path)
    collector.visit(ast.parse(path.read_text(), filename=str(path)))
    return collector


def imports(module: str, path: Path) -> list[Import]:
    """Every import in the file, in source order."""
    return _collected(module, path).found


def string_imports(module: str, path: Path) -> list[Import]:
    """The modules the file's "module:attribute" strings name, each a lazy import, in source order."""
    return _collected(module, path).entries


def target(modules: Mapping[str, Path], found: Import) -> str | None:
    """The module of ours an import loads (the submodule `name` where there is one), or None."""
    if found.name is not None and f"{found.source}.{found.name}" in modules:
        return f"{found.source}.{found.name}"
    return found.source if found.source in modules else None


def import_graph(
    modules: Mapping[str, Path], packages: Iterable[str]
) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the modules of ours it imports (string imports included), and the imports of ours
    that name no file."""
    ours = set(packages)
    graph: dict[str, set[str]] = {module: set() for module in modules}
    unresolved: list[str] = []
    for module, path in modules.items():
        collected = _collected(module, path)
        for found in [*collected.found, *collected.entries]:
            if found.source.split(".")[0] not in ours:
                continue
            loaded = target(modules, found)
            if loaded is None:
                unresolved.append(f"{module}: {found.source}" + (f" ({found.name})" if found.name else ""))
            elif loaded != module:
                graph[module].add(loaded)
    return graph, unresolved


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph.get(successor, ()))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def package_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Cycles between the parts of a package, at every depth: each part (a subpackage with all below
    it, or a module) is one node, and part A -> part B when any module in A imports any module in B.
    Top-level packages are the parts of the root. An import joins the two parts of the deepest package
    that holds both its ends; a package's own `__init__` belongs to no part of it."""
    levels: dict[str, dict[str, set[str]]] = {}
    for module, targets in graph.items():
        here = module.split(".")
        for loaded in targets:
            there = loaded.split(".")
            depth = 0
            while depth < min(len(here), len(there)) and here[depth] == there[depth]:
                depth += 1
            if depth in (len(here), len(there)):
                continue  # one end is the package that holds the other
            package = ".".join(here[:depth])
            part, other = ".".join(here[: depth + 1]), ".".join(there[: depth + 1])
            levels.setdefault(package, {}).setdefault(part, set()).add(other)
    return sorted(cycle for package in sorted(levels) for cycle in cycles(levels[package]))

"""The import graph of our packages, read from the source: no cycle between files, and no import that
the README's package table forbids.

Every import statement counts, function-local and `if TYPE_CHECKING:` ones included (a cycle hidden
in a function is still a cycle), and so do `__import__`/`importlib.import_module` calls with a literal
name. An import names the most specific file it loads: `from a.b import c` is `a/b/c.py` when that
module exists, else `a/b/__init__.py` (or `a/b.py`), whose name `c` is.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "schemas",
    "sandboxes",
    "collectors",
    "beam_pipelines",
    "training",
    "infra",
    "benchmarks",
    "tests",
)
IMPORTED_BY_NOTHING = {"infra"}  # images, manifests and host scripts


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


def imported_names(module: str, path: Path) -> list[tuple[str, str | None]]:
    """(module, name imported from it or None) for every import in the file, relative ones resolved."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    raise ValueError(f"{path}:{node.lineno}: relative import beyond the top package")
                base = package[: len(package) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found += [(source, alias.name) for alias in node.names]
        elif isinstance(node, ast.Call) and (name := _dynamic_import(node)):
            found.append((name, None))
    return found


def import_graph(
    modules: Mapping[str, Path], packages: Iterable[str]
) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the modules of ours it imports, and the imports of ours that name no file."""
    ours = set(packages)
    graph: dict[str, set[str]] = {module: set() for module in modules}
    unresolved: list[str] = []
    for module, path in modules.items():
        for source, name in imported_names(module, path):
            if source.split(".")[0] not in ours:
                continue
            if name is not None and f"{source}.{name}" in modules:
                target = f"{source}.{name}"
            elif source in modules:
                target = source
            else:
                unresolved.append(f"{module}: {source}" + (f" ({name})" if name else ""))
                continue
            if target != module:
                graph[module].add(target)
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


def allowed_imports(readme: str) -> dict[str, set[str]]:
    """The README's package table: folder -> the packages of ours it may import."""
    rows = re.findall(r"^\| `(\w+)/` \|.*\| ([^|]+) \|$", readme, re.MULTILINE)
    folders = {folder for folder, _ in rows}
    allowed: dict[str, set[str]] = {}
    for folder, may_import in rows:
        may_import = may_import.strip()
        if may_import == "everything":
            allowed[folder] = folders - IMPORTED_BY_NOTHING - {folder}
        elif may_import in ("nothing of ours", "-"):
            allowed[folder] = set()
        else:
            allowed[folder] = set(re.findall(r"`(\w+)`", may_import))
    return allowed


def forbidden_imports(graph: Mapping[str, Iterable[str]], allowed: Mapping[str, set[str]]) -> list[str]:
    found = []
    for module, targets in graph.items():
        package = module.split(".")[0]
        for target in sorted(targets):
            other = target.split(".")[0]
            if other != package and (other in IMPORTED_BY_NOTHING or other not in allowed[package]):
                found.append(f"{module} -> {target}")
    return found


# --- the checker itself, on small made-up trees ---------------------------------------------------


def test_cycles_are_found_and_an_acyclic_graph_has_none() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": set(), "f": {"g"}, "g": {"f"}}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["f", "g"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) == []
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(5000)} | {"m5000": {"m0"}}  # deeper than recursion goes
    assert [len(c) for c in cycles(chain)] == [5001]


def test_imports_resolve_to_modules_or_packages(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg.core import VALUE\n")
    (tmp_path / "pkg" / "core.py").write_text("VALUE = 1\n")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("from .. import core\n")
    (tmp_path / "pkg" / "sub" / "leaf.py").write_text(
        "from . import helper\nfrom pkg import VALUE\n\n\ndef late():\n    import pkg.core\n"
    )
    (tmp_path / "pkg" / "sub" / "helper.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .leaf import late\n"
    )
    (tmp_path / "other.py").write_text("import pkg\n")  # outside the packages: not in the graph
    modules = module_files(tmp_path, ["pkg"])
    graph, unresolved = import_graph(modules, ["pkg"])
    assert graph == {
        "pkg": {"pkg.core"},
        "pkg.core": set(),
        "pkg.sub": {"pkg.core"},
        "pkg.sub.leaf": {"pkg.sub.helper", "pkg", "pkg.core"},
        "pkg.sub.helper": {"pkg.sub.leaf"},
    }
    assert unresolved == []
    assert cycles(graph) == [["pkg.sub.helper", "pkg.sub.leaf"]]
    (tmp_path / "pkg" / "core.py").write_text("from pkg.missing import x\nimport typing\n")
    assert import_graph(module_files(tmp_path, ["pkg"]), ["pkg"])[1] == ["pkg.core: pkg.missing (x)"]


def test_the_table_is_read_and_applied() -> None:
    table = (
        "| folder | what | may import |\n|---|---|---|\n| `low/` | base | nothing of ours |\n"
        "| `mid/` | uses low | `low` |\n| `top/` | all | everything |\n| `infra/` | setup | - |\n"
    )
    allowed = allowed_imports(table)
    assert allowed["low"] == set() and allowed["mid"] == {"low"} and allowed["infra"] == set()
    assert allowed["top"] == {"low", "mid"}
    graph = {"low.a": {"mid.b"}, "mid.b": {"low.a"}, "top.c": {"mid.b", "infra.d"}, "infra.d": set()}
    assert forbidden_imports(graph, allowed) == ["low.a -> mid.b", "top.c -> infra.d"]


# --- our packages ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    graph, unresolved = import_graph(module_files(ROOT, PACKAGES), PACKAGES)
    assert not unresolved, "imports of ours that name no module:\n" + "\n".join(unresolved)
    return graph


def test_no_import_cycles_between_files(graph: dict[str, set[str]]) -> None:
    found = cycles(graph)
    assert not found, (
        "files that import each other, in a circle (move what they share into a lower module):\n"
        + ("\n".join(", ".join(cycle) for cycle in found))
    )


def test_packages_import_only_what_the_readme_table_allows(graph: dict[str, set[str]]) -> None:
    allowed = allowed_imports((ROOT / "README.md").read_text())
    assert set(allowed) == set(PACKAGES), f"the README's package table lists {sorted(allowed)}"
    found = forbidden_imports(graph, allowed)
    assert not found, "imports the README's package table forbids:\n" + "\n".join(found)

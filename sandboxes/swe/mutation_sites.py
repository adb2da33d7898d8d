"""Where a bug can be injected: `ast` sites in a repository's source files, each with the exact
character span to rewrite and its replacement text."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

COMPARE_SWAPS = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.Is: ("is", "is not"),
    ast.IsNot: ("is not", "is"),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
}
ARITHMETIC_SWAPS = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "//"),
    ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "*"),
    ast.Mod: ("%", "//"),
}
BOOL_SWAPS = {ast.And: ("and", "or"), ast.Or: ("or", "and")}
MAX_REMOVED_LINES = 12
_TEST_PARTS = {"test", "tests", "testing", "testsuite", "doc", "docs", "examples", "benchmarks", "scripts"}
_NOT_SOURCE = re.compile(r"^(test_.*|.*_test|conftest|setup|noxfile|tasks|fabfile|_version|version)\.py$")


@dataclass(frozen=True)
class Site:
    file: str  # relative to the repository root
    start: int  # character offsets of the span in the file's text
    end: int
    replacement: str
    line: int
    kind: str  # compare, arithmetic, boolean, constant, slice, remove_branch, return
    operator: str  # e.g. "< -> <=", "+1", "if-body -> pass"
    description: str


def source_files(repo: Path, source: Sequence[str] = ()) -> list[str]:
    """The .py files a mutation may change, relative and sorted: under `source` when given, else the
    whole repository; never a test, setup, documentation or example file."""
    roots = [repo / entry for entry in source] or [repo]
    found: set[str] = set()
    for root in roots:
        paths = [root] if root.is_file() else root.rglob("*.py")
        for path in paths:
            relative = path.relative_to(repo)
            parts = {part.lower() for part in relative.parts[:-1]}
            if ".git" in parts or parts & _TEST_PARTS or _NOT_SOURCE.match(relative.name):
                continue
            found.add(relative.as_posix())
    return sorted(found)


class _Offsets:
    """ast positions (1-based line, UTF-8 byte column) -> character offsets in the text."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def __call__(self, line: int, col: int) -> int:
        return self.starts[line - 1] + len(self.lines[line - 1].encode("utf-8")[:col].decode("utf-8"))


def find_sites(repo: Path, source: Sequence[str] = ()) -> list[Site]:
    """Every mutation site in the source files, in file and position order."""
    sites: list[Site] = []
    for relative in source_files(Path(repo), source):
        try:
            text = (Path(repo) / relative).read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # Python 2 files, generated data: not ours to mutate
        sites.extend(_FileSites(relative, text).visit_tree(tree))
    return sites


class _FileSites:
    def __init__(self, file: str, text: str) -> None:
        self.file, self.text, self.offset = file, text, _Offsets(text)

    def visit_tree(self, tree: ast.AST) -> list[Site]:
        parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        found: list[Site] = []
        for node in ast.walk(tree):
            found.extend(self._sites(node, parents.get(id(node))))
        return sorted(found, key=lambda s: (s.start, s.kind, s.replacement))

    def _sites(self, node: ast.AST, parent: ast.AST | None) -> Iterator[Site]:
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                yield from self._between(operands[i], operands[i + 1], COMPARE_SWAPS.get(type(op)), "compare")
        elif isinstance(node, ast.BinOp) and not (_is_text(node.left) or _is_text(node.right)):
            yield from self._between(node.left, node.right, ARITHMETIC_SWAPS.get(type(node.op)), "arithmetic")
        elif isinstance(node, ast.AugAssign):
            swap = ARITHMETIC_SWAPS.get(type(node.op))
            if swap and not _is_text(node.value):
                yield from self._between(
                    node.target, node.value, (swap[0] + "=", swap[1] + "="), "arithmetic"
                )
        elif isinstance(node, ast.BoolOp):
            for left, right in zip(node.values, node.values[1:], strict=False):
                yield from self._between(left, right, BOOL_SWAPS[type(node.op)], "boolean")
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            yield from self._constant(node, "slice" if isinstance(parent, ast.Slice) else "constant")
        elif isinstance(node, ast.Slice):
            for bound in (node.lower, node.upper):
                if isinstance(bound, ast.Name | ast.Attribute | ast.Call):
                    yield self._span(bound, self._source(bound) + " + 1", "slice", "+1")
        elif isinstance(node, ast.If):
            yield from self._removed_branch(node)
        elif isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                if node.value.lineno == node.value.end_lineno:
                    yield self._span(node.value, "None", "return", "return value -> None")

    def _source(self, node: ast.AST) -> str:
        start, end = self._bounds(node)
        return self.text[start:end]

    def _bounds(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        return start, self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def _site(self, start: int, end: int, new: str, kind: str, operator: str, line: int) -> Site:
        old = self.text[start:end]
        shown_old, shown_new = _short(old), _short(new)
        description = f"{kind}: `{shown_old}` -> `{shown_new}` in {self.file} line {line}"
        return Site(self.file, start, end, new, line, kind, operator, description)

    def _span(self, node: ast.AST, new: str, kind: str, operator: str) -> Site:
        start, end = self._bounds(node)
        return self._site(start, end, new, kind, operator, node.lineno)  # type: ignore[attr-defined]

    def _between(
        self, left: ast.AST, right: ast.AST, swap: tuple[str, str] | None, kind: str
    ) -> Iterator[Site]:
        """The operator token alone between two operands (no parentheses or comments in between)."""
        if swap is None:
            return
        gap_start, gap_end = self._bounds(left)[1], self._bounds(right)[0]
        gap = self.text[gap_start:gap_end]
        token = " ".join(gap.split())
        if token != swap[0]:
            return
        start = gap_start + gap.index(gap.split()[0])
        end = gap_start + len(gap.rstrip())
        line = self.text.count("\n", 0, start) + 1
        yield self._site(start, end, swap[1], kind, f"{swap[0]} -> {swap[1]}", line)

    def _constant(self, node: ast.Constant, kind: str) -> Iterator[Site]:
        literal = self._source(node)
        if not literal.isdigit():
            return  # hex, octal, underscores: leave them be
        value = int(literal)
        for new in (value + 1, value - 1) if value > 0 else (value + 1,):
            yield self._span(node, str(new), kind, f"{value} -> {new}")

    def _removed_branch(self, node: ast.If) -> Iterator[Site]:
        first, last = node.body[0], node.body[-1]
        if first.lineno <= node.test.end_lineno:  # type: ignore[operator]
            return  # `if x: y` on one line
        if last.end_lineno - first.lineno >= MAX_REMOVED_LINES:  # type: ignore[operator]
            return
        if len(node.body) == 1 and isinstance(first, ast.Pass):
            return
        if getattr(first, "decorator_list", None):
            return
        test = ast.unparse(node.test)
        if "__name__" in test or "TYPE_CHECKING" in test:
            return
        start, end = self._bounds(first)[0], self._bounds(last)[1]
        yield self._site(start, end, "pass", "remove_branch", "if-body -> pass", first.lineno)


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 40 else flat[:37] + "..."

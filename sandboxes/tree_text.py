"""What the UI-tree observation texts (android_ui_tree, desktop_a11y_tree) share, read back by one
loop: an optional first line `Error: <message>`, the domain's head line, one node a line indented
two spaces per depth, and, when the tree was cut, a last line `[... <n> more nodes not shown]`.
Quoted strings escape `"` and `\\` with a backslash. A line of no known form is kept as text, never an
error: recorded and predicted (simulated) texts are read alike."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Self, TypeVar

INDENT = 2  # spaces per depth level
_MORE_RE = re.compile(r"^\s*\[\.\.\. (\d+) more nodes? not shown\]\s*$")
_ERROR_RE = re.compile(r"^Error: ?(.*)$")

NodeT = TypeVar("NodeT")


def unquote(text: str) -> str:
    """A quoted string's content, its escapes undone."""
    try:
        return json.loads(f'"{text}"')
    except ValueError:  # an escape JSON does not know: keep what was written
        return text


@dataclass
class TreeText(Generic[NodeT]):
    """The parts of a tree text every domain has; a domain adds its head line's parts."""

    error: str = ""
    nodes: list[NodeT] = field(default_factory=list)
    more: int = 0  # nodes the marker line says were not shown
    other_lines: list[str] = field(default_factory=list)  # lines of no known form

    @property
    def truncated(self) -> bool:
        return self.more > 0

    def _takes_error(self) -> bool:
        """Whether an `Error:` line read now is the error line (it comes before the rest)."""
        raise NotImplementedError

    def _take_head(self, line: str) -> bool:
        """Reads `line` if it is the head line where one may come (before any node)."""
        raise NotImplementedError

    def read(self, text: str, parse_node: Callable[[str], NodeT | None]) -> Self:
        """Every line of `text` into this tree; unknown lines go to `other_lines`."""
        for line in text.split("\n"):
            if not line.strip():
                continue
            if self._takes_error() and (error := _ERROR_RE.match(line)):
                self.error = error.group(1).strip()
            elif not self.nodes and self._take_head(line):
                continue
            elif (more := _MORE_RE.match(line)) is not None:
                self.more = int(more.group(1))
            elif (node := parse_node(line)) is not None:
                self.nodes.append(node)
            else:
                self.other_lines.append(line)
        return self

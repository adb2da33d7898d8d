"""Reading a desktop observation's text (format `desktop_a11y_tree`) back into nodes.

The text, as the desktop sandbox writes it (sandboxes/desktop; the issue 10 observation contract):
an optional first line `Error: <message>` when the last action failed, a line
`Focused: <application> — <window title>` (or `Focused: none`), then one node a line, indented two
spaces per depth:

    [<id>] <role> "<name>"[ value="<text>"][ states=<comma list>] @(<x>,<y> <w>x<h>)

and, when the tree was cut, a last line `[... <n> more nodes not shown]`. Roles are AT-SPI role
names and may hold spaces (`push button`, `menu item`). Quoted strings escape `"` and `\\` with a
backslash. A line that does not follow the form is kept as text, never an error: the collector's
explorer and the fidelity metrics both read recorded and predicted text with this one parser. It lives
beside the sandbox that writes the form so that both can import it (training does not import collectors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sandboxes.tree_text import INDENT, TreeText, unquote

_NODE_RE = re.compile(
    r"^(?P<indent> *)\[(?P<id>[^\]\s]+)\] (?P<role>[^\"\[\]]+?) "
    r'"(?P<name>(?:[^"\\]|\\.)*)"'
    r'(?: value="(?P<value>(?:[^"\\]|\\.)*)")?'
    r"(?: states=(?P<states>[^\s@]*))?"
    r"(?: @\((?P<x>-?\d+),(?P<y>-?\d+) (?P<w>\d+)x(?P<h>\d+)\))?\s*$"
)
_FOCUSED_RE = re.compile(r"^Focused: ?(.*)$")


@dataclass(frozen=True)
class Node:
    id: str
    depth: int
    role: str
    name: str
    value: str | None = None
    states: frozenset[str] = frozenset()
    box: tuple[int, int, int, int] | None = None  # x, y, width, height in screen pixels

    @property
    def centre(self) -> tuple[int, int] | None:
        if self.box is None:
            return None
        x, y, w, h = self.box
        return x + w // 2, y + h // 2

    def contains(self, x: int, y: int) -> bool:
        if self.box is None:
            return False
        bx, by, w, h = self.box
        return bx <= x < bx + w and by <= y < by + h

    def key(self) -> tuple[str, str, str]:
        """What the node is, whatever id and position it was given: (role, name, value)."""
        return self.role, self.name, self.value or ""


@dataclass
class DesktopTree(TreeText[Node]):
    focused: str = ""  # "<application> — <window title>", "" for `Focused: none` or no line
    has_focused_line: bool = False

    def _takes_error(self) -> bool:
        return not self.nodes and not self.has_focused_line

    def _take_head(self, line: str) -> bool:
        focused = _FOCUSED_RE.match(line)  # a later one replaces an earlier one
        if focused is not None:
            self.has_focused_line = True
            value = focused.group(1).strip()
            self.focused = "" if value == "none" else value
        return focused is not None

    @property
    def focused_application(self) -> str:
        return self.focused.split(" — ", 1)[0].strip()

    def node_at(self, x: int, y: int) -> Node | None:
        """The deepest node whose box holds the point (the last in walk order on ties)."""
        hits = [n for n in self.nodes if n.contains(x, y)]
        return max(hits, key=lambda n: n.depth) if hits else None


def parse_node(line: str) -> Node | None:
    """One tree line as a Node, or None when it is not a node line."""
    found = _NODE_RE.match(line.rstrip("\n"))
    if found is None:
        return None
    box = None
    if found.group("x") is not None:
        box = tuple(int(found.group(k)) for k in ("x", "y", "w", "h"))
    states = frozenset(s for s in (found.group("states") or "").split(",") if s)
    return Node(
        id=found.group("id"),
        depth=len(found.group("indent")) // INDENT,
        role=found.group("role").strip(),
        name=unquote(found.group("name")),
        value=None if found.group("value") is None else unquote(found.group("value")),
        states=states,
        box=box,  # type: ignore[arg-type]
    )


def parse_tree(text: str) -> DesktopTree:
    """Every part of an observation's text; unknown lines go to `other_lines`."""
    return DesktopTree().read(text, parse_node)

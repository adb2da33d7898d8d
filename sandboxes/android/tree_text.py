"""Reading an Android observation's text (format `android_ui_tree`) back into nodes.

The text, as the Android sandbox writes it (sandboxes/android; the issue 11 observation contract):
an optional first line `Error: <message>` when the last action failed, a line
`Package: <package>  Activity: <activity>` (`unknown` when not reported), then one node a line,
indented two spaces per depth:

    [<index>] <class> "<text>"[ desc="<content-desc>"][ id=<resource-id>] @(<x1>,<y1>,<x2>,<y2>)[ <flags>]

where the flags are a comma list of clickable, long-clickable, editable, scrollable, focused,
checked, selected, disabled; and, when the tree was cut, a last line `[... <n> more nodes not shown]`.
Quoted strings escape `"` and `\\` with a backslash. A line that does not follow the form is kept
as text, never an error: the collector's explorer, the simulator and the fidelity metrics all read
recorded and predicted text with this one parser. It lives beside the sandbox that writes the form
(sandboxes/android/tree.py) so that both can import it (training does not import collectors).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sandboxes.tree_text import INDENT, TreeText, unquote

_NODE_RE = re.compile(
    r"^(?P<indent> *)\[(?P<index>\d+)\] (?P<cls>\S+) "
    r'"(?P<text>(?:[^"\\]|\\.)*)"'
    r'(?: desc="(?P<desc>(?:[^"\\]|\\.)*)")?'
    r"(?: id=(?P<rid>\S+))?"
    r" @\((?P<x1>-?\d+),(?P<y1>-?\d+),(?P<x2>-?\d+),(?P<y2>-?\d+)\)"
    r"(?: (?P<flags>[a-z,-]+))?\s*$"
)
_HEAD_RE = re.compile(r"^Package: (?P<package>\S*)\s+Activity: (?P<activity>.*)$")
FLAGS = (
    "clickable", "long-clickable", "editable", "scrollable", "focused", "checked", "selected", "disabled",
)  # fmt: skip


@dataclass(frozen=True)
class Node:
    index: int
    depth: int
    cls: str  # android.widget.Button
    text: str
    desc: str = ""
    rid: str = ""  # resource id, e.g. com.android.settings:id/search
    bounds: tuple[int, int, int, int] = (0, 0, 0, 0)  # x1, y1, x2, y2 in screen pixels
    flags: frozenset[str] = frozenset()

    @property
    def centre(self) -> tuple[int, int]:
        x1, y1, x2, y2 = self.bounds
        return (x1 + x2) // 2, (y1 + y2) // 2

    @property
    def visible(self) -> bool:
        x1, y1, x2, y2 = self.bounds
        return x2 > x1 and y2 > y1

    @property
    def enabled(self) -> bool:
        return "disabled" not in self.flags

    def key(self) -> tuple[str, str, str, str]:
        """What the node is, whatever index and position it was given: (class, text, desc, id)."""
        return self.cls, self.text, self.desc, self.rid

    @property
    def short_class(self) -> str:
        return self.cls.rsplit(".", 1)[-1]


@dataclass
class AndroidTree(TreeText[Node]):
    package: str = ""
    activity: str = ""
    has_head: bool = False  # the `Package:` line was there

    def _takes_error(self) -> bool:
        return not self.nodes and not self.has_head and not self.error

    def _take_head(self, line: str) -> bool:
        head = None if self.has_head else _HEAD_RE.match(line)
        if head is not None:
            self.has_head = True
            self.package = head.group("package")
            self.activity = head.group("activity").strip()
        return head is not None

    @property
    def screen(self) -> tuple[int, int]:
        """The screen size the bounds reach (the root node's, usually); 1080x2400 when none is placed."""
        width = max((n.bounds[2] for n in self.nodes), default=0)
        height = max((n.bounds[3] for n in self.nodes), default=0)
        return (width or 1080), (height or 2400)

    def node(self, index: int) -> Node | None:
        return next((n for n in self.nodes if n.index == index), None)

    def node_at(self, x: int, y: int) -> Node | None:
        """The deepest node whose bounds hold the point."""
        hits = [n for n in self.nodes if n.bounds[0] <= x < n.bounds[2] and n.bounds[1] <= y < n.bounds[3]]
        return max(hits, key=lambda n: n.depth) if hits else None


def parse_node(line: str) -> Node | None:
    """One tree line as a Node, or None when it is not a node line."""
    found = _NODE_RE.match(line.rstrip("\n"))
    if found is None:
        return None
    return Node(
        index=int(found.group("index")),
        depth=len(found.group("indent")) // INDENT,
        cls=found.group("cls"),
        text=unquote(found.group("text")),
        desc=unquote(found.group("desc") or ""),
        rid=found.group("rid") or "",
        bounds=tuple(int(found.group(k)) for k in ("x1", "y1", "x2", "y2")),  # type: ignore[arg-type]
        flags=frozenset(f for f in (found.group("flags") or "").split(",") if f),
    )


def parse_tree(text: str) -> AndroidTree:
    """Every part of an observation's text; unknown lines go to `other_lines`."""
    return AndroidTree().read(text, parse_node)

"""The Appium page source (UiAutomator2's hierarchy XML, or a fake-driver app XML) compacted to the
`android_ui_tree` text: one node a line, two spaces of indent per depth,

    [<index>] <class> "<text>"[ desc="<content-desc>"][ id=<resource-id>] @(<x1>,<y1>,<x2>,<y2>)[ <flags>]

Nodes with no text, description, id and flags are folded into their children; hidden nodes
(`displayed="false"`, or the fake driver's `visible="false"`) are left out with their subtrees.
Each shown node keeps the XPath that finds it again (positional steps from the root), so an action
on `[index]` reaches the same node through any driver's XPath finder.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

# The flags of a node line, in this order, and the attribute each comes from (value "true").
FLAG_ATTRIBUTES = (
    ("clickable", "clickable"),
    ("long-clickable", "long-clickable"),
    ("editable", "editable"),
    ("scrollable", "scrollable"),
    ("focused", "focused"),
    ("checked", "checked"),
    ("selected", "selected"),
)
MAX_TEXT_CHARS = 200
_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")
# Class names that are text fields although the source has no `editable` attribute (UiAutomator2's
# hierarchy has none on older servers; the fake driver types only into MockInputField).
_EDITABLE_CLASSES = ("EditText", "AutoCompleteTextView", "MockInputField")


@dataclass(frozen=True)
class Node:
    index: int
    depth: int  # of the shown ancestors
    xpath: str
    cls: str
    text: str
    desc: str
    resource_id: str
    bounds: tuple[int, int, int, int]
    flags: tuple[str, ...]

    @property
    def center(self) -> tuple[int, int]:
        x1, y1, x2, y2 = self.bounds
        return (x1 + x2) // 2, (y1 + y2) // 2


@dataclass
class Screen:
    package: str
    nodes: list[Node] = field(default_factory=list)  # the shown nodes, in index order
    hidden_nodes: int = 0  # shown-worthy nodes past max_nodes

    @property
    def truncated(self) -> bool:
        return self.hidden_nodes > 0


class PageSourceError(ValueError):
    """The page source is not XML."""


def _bounds(element: ET.Element) -> tuple[int, int, int, int]:
    found = _BOUNDS.fullmatch(element.get("bounds", "").strip())
    if found:
        x1, y1, x2, y2 = (int(v) for v in found.groups())
        return x1, y1, x2, y2
    try:  # the fake driver's app XML places elements with left/top/width/height
        left, top = float(element.get("left", 0)), float(element.get("top", 0))
        width, height = float(element.get("width", 0)), float(element.get("height", 0))
    except ValueError:
        return 0, 0, 0, 0
    return round(left), round(top), round(left + width), round(top + height)


def _flags(element: ET.Element, cls: str) -> tuple[str, ...]:
    flags = [name for name, attribute in FLAG_ATTRIBUTES if element.get(attribute) == "true"]
    if "editable" not in flags and cls.endswith(_EDITABLE_CLASSES):
        flags.insert(len([f for f in flags if f in ("clickable", "long-clickable")]), "editable")
    if element.get("enabled") == "false":
        flags.append("disabled")
    return tuple(flags)


def _text(element: ET.Element) -> str:
    text = element.get("text")
    if text is None:  # a fake app XML may write text as element content
        text = (element.text or "").strip()
    return text


def _quoted(value: str) -> str:
    if len(value) > MAX_TEXT_CHARS:
        value = value[:MAX_TEXT_CHARS] + "…"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _hidden(element: ET.Element) -> bool:
    return element.get("displayed") == "false" or element.get("visible") == "false"


def node_line(node: Node) -> str:
    parts = [f"{'  ' * node.depth}[{node.index}] {node.cls} {_quoted(node.text)}"]
    if node.desc:
        parts.append(f"desc={_quoted(node.desc)}")
    if node.resource_id:
        parts.append(f"id={node.resource_id}")
    parts.append("@({},{},{},{})".format(*node.bounds))
    if node.flags:
        parts.append(",".join(node.flags))
    return " ".join(parts)


def parse_screen(source: str, max_nodes: int = 300) -> Screen:
    """The shown nodes and text lines of a page source; PageSourceError when it is not XML."""
    try:
        root = ET.fromstring(source.encode() if isinstance(source, str) else source)
    except ET.ParseError as exc:
        raise PageSourceError(f"the page source is not XML: {exc}") from exc
    screen = Screen(package="")
    _walk(root, "/*[1]", 0, screen, max_nodes)
    return screen


def _walk(element: ET.Element, xpath: str, depth: int, screen: Screen, max_nodes: int) -> None:
    if _hidden(element):
        return
    if not screen.package and element.get("package"):
        screen.package = element.get("package", "")
    cls = element.get("class") or element.tag
    text, desc, resource_id = _text(element), element.get("content-desc", ""), element.get("resource-id", "")
    flags = _flags(element, cls)
    child_depth = depth
    if text or desc or resource_id or flags:
        if len(screen.nodes) >= max_nodes:
            screen.hidden_nodes += 1
        else:
            node = Node(
                len(screen.nodes), depth, xpath, cls, text, desc, resource_id, _bounds(element), flags
            )
            screen.nodes.append(node)
        child_depth = depth + 1
    for position, child in enumerate(element, start=1):
        _walk(child, f"{xpath}/*[{position}]", child_depth, screen, max_nodes)


def render(screen: Screen, package: str, activity: str, error: str = "") -> str:
    """The observation text: an error line when the action failed, the package line, the nodes."""
    lines = [f"Error: {error}"] if error else []
    lines.append(f"Package: {package or 'unknown'}  Activity: {activity or 'unknown'}")
    lines.extend(node_line(node) for node in screen.nodes)
    if screen.truncated:
        lines.append(f"[... {screen.hidden_nodes} more nodes not shown]")
    return "\n".join(lines)

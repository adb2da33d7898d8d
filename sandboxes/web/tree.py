"""The page's accessibility tree as BrowserGym-style text, from Playwright's AI-mode ARIA snapshot.

Why this source: `locator.aria_snapshot(mode="ai")` is Chromium's accessibility computation as
Playwright exposes it (roles, names, states, hidden elements left out), with a `[ref=eN]` id on
every element an action can target. Playwright keeps an element's ref for the life of its
document, so the ids are stable bids within a page, and `aria-ref=eN` selects the element again.
Measured here on a 400-element page: about 60-80 ms, against about 380 ms for CDP
`Accessibility.getFullAXTree` on the same page (see the README section of sandboxes/web).

The snapshot is YAML of the form
    - link "Cart (2)" [ref=e3] [cursor=pointer]:
      - /url: /cart
    - textbox "Email" [ref=e6]: alice@example.com
and becomes, one node a line, tab-indented by depth:
    [3] link 'Cart (2)', url='/cart'
    [6] textbox 'Email', value='alice@example.com'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_KEY = re.compile(r'^(?P<role>[A-Za-z/][\w-]*)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<attrs>(?: \[[^\]]*\])*)$')
_ATTR = re.compile(r"\[([^\]=]+)(?:=([^\]]*))?\]")
VALUE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "slider"})
ACTIONABLE_ROLES = frozenset(
    {
        "button", "checkbox", "combobox", "link", "listbox", "menuitem", "menuitemcheckbox",
        "menuitemradio", "option", "radio", "searchbox", "slider", "spinbutton", "switch", "tab",
        "textbox", "treeitem",
    }
)  # fmt: skip
EDITABLE_ROLES = frozenset({"textbox", "searchbox"})
STATE_ORDER = ("focused", "level", "checked", "selected", "pressed", "expanded", "disabled")


@dataclass
class Node:
    role: str
    name: str = ""
    bid: str = ""
    states: dict[str, str] = field(default_factory=dict)  # "checked" -> "" (bare) or "mixed"
    value: str = ""
    url: str = ""
    placeholder: str = ""
    pointer: bool = False
    children: list[Node] = field(default_factory=list)


@dataclass
class Tree:
    text: str  # the tree lines, without the header
    focused_bid: str
    elements: list[dict]
    refs: dict[str, str]  # bid -> Playwright aria ref, for `aria-ref=<ref>` selectors
    node_count: int
    truncated: bool = False


def frame_prefix(ref: str) -> str:
    """ "f1e12" -> "f1"; "e12" -> ""."""
    return ref[: ref.rindex("e")] if "e" in ref else ""


def bid_of_ref(ref: str, main_prefix: str) -> str:
    """A ref of the main document ("f1e12" where the document's refs start "f1") -> bid "12";
    refs inside iframes keep their frame prefix ("f2e3"), so bids never collide."""
    prefix = frame_prefix(ref)
    return ref[len(prefix) + 1 :] if prefix == main_prefix else ref


def _split_key_value(content: str) -> tuple[str, str | None]:
    """Split `key: value` / `key:` / `key` at the first colon outside double quotes."""
    if content.startswith("'"):  # YAML single-quoted key ('' is an escaped quote)
        end = 1
        while True:
            end = content.index("'", end)
            if content[end + 1 : end + 2] == "'":
                end += 2
                continue
            break
        key, rest = content[1:end].replace("''", "'"), content[end + 1 :]
        return key, (rest[1:].strip() if rest.startswith(":") else None)
    quoted = escaped = False
    for i, char in enumerate(content):
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == ":" and not quoted and (i + 1 == len(content) or content[i + 1] == " "):
            return content[:i], content[i + 1 :].strip()
    return content, None


def _scalar(text: str) -> str:
    """A YAML scalar as Playwright writes one: plain, "double-quoted" (JSON escapes) or 'single'."""
    if len(text) >= 2 and text[0] == '"' == text[-1]:
        try:
            return json.loads(text)
        except ValueError:
            return text[1:-1]
    if len(text) >= 2 and text[0] == "'" == text[-1]:
        return text[1:-1].replace("''", "'")
    return text


def parse_snapshot(snapshot: str) -> list[Node]:
    """The snapshot's top-level nodes, children nested."""
    roots: list[Node] = []
    stack: list[tuple[int, Node]] = []
    for line in snapshot.splitlines():
        stripped = line.lstrip(" ")
        if not stripped.startswith("- "):
            continue  # continuation of a multi-line scalar: not produced for page content
        indent = len(line) - len(stripped)
        key, value = _split_key_value(stripped[2:])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else None
        if key in ("/url", "/placeholder") and parent is not None:
            setattr(parent, key[1:], _scalar(value or ""))
            continue
        if key == "text":
            node = Node(role="StaticText", name=_scalar(value or ""))
        else:
            match = _KEY.match(key)
            if match is None:  # an unexpected form: keep its text rather than lose it
                node = Node(role="StaticText", name=_scalar(key))
            else:
                node = _element(match)
                if value:
                    node.value = _scalar(value)
        (parent.children if parent is not None else roots).append(node)
        stack.append((indent, node))
    return roots


def _element(match: re.Match[str]) -> Node:
    name = match["name"]
    node = Node(role=match["role"], name=json.loads(f'"{name}"') if name else "")
    for attr, value in _ATTR.findall(match["attrs"] or ""):
        if attr == "ref":
            node.bid = value  # the ref for now; the renderer turns it into a bid
        elif attr == "cursor":
            node.pointer = value == "pointer"
        elif attr == "active":
            node.states["focused"] = ""
        else:
            node.states[attr] = "" if value in ("", "true") else value
    return node


def _quote(text: str, limit: int) -> str:
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", " ") + "'"


class _Renderer:
    def __init__(self, max_lines: int, max_name: int) -> None:
        self.max_lines, self.max_name = max_lines, max_name
        self.lines: list[str] = []
        self.dropped = 0
        self.nodes = 0
        self.focused = ""
        self.elements: list[dict] = []
        self.refs: dict[str, str] = {}
        self.main_prefix = ""

    def emit(self, depth: int, text: str) -> None:
        self.nodes += 1
        if len(self.lines) < self.max_lines:
            self.lines.append("\t" * depth + text)
        else:
            self.dropped += 1

    def node(self, node: Node, depth: int) -> None:
        if node.role == "StaticText":
            self.emit(depth, f"StaticText {_quote(node.name, self.max_name)}")
            return
        if node.bid:
            ref = node.bid
            node.bid = bid_of_ref(ref, self.main_prefix)
            self.refs[node.bid] = ref
        if "focused" in node.states and node.bid:
            self.focused = node.bid  # the deepest focused node wins: its ancestors are marked too
        invisible_wrapper = (
            node.role == "generic"
            and not node.name
            and not node.pointer
            and not node.value
            and not node.states
        )
        if invisible_wrapper:  # a plain <div>: its children carry the content
            for child in node.children:
                self.node(child, depth)
            return
        self.emit(depth, self.line(node))
        self.record_element(node)
        if node.value and node.role not in VALUE_ROLES:
            self.emit(depth + 1, f"StaticText {_quote(node.value, self.max_name)}")
        for child in node.children:
            self.node(child, depth + 1)

    def line(self, node: Node) -> str:
        head = f"[{node.bid}] {node.role}" if node.bid else node.role
        parts = [f"{head} {_quote(node.name, self.max_name)}" if node.name else head]
        for state in sorted(node.states, key=lambda s: STATE_ORDER.index(s) if s in STATE_ORDER else 99):
            value = node.states[state]
            parts.append(
                f"{state}={value}" if state == "level" else f"{state}={_quote(value, 40)}" if value else state
            )
        if node.value and node.role in VALUE_ROLES:
            parts.append(f"value={_quote(node.value, self.max_name)}")
        if node.placeholder:
            parts.append(f"placeholder={_quote(node.placeholder, self.max_name)}")
        if node.url:
            parts.append(f"url={_quote(node.url, self.max_name)}")
        if node.pointer and node.role not in ACTIONABLE_ROLES:
            parts.append("clickable")
        return ", ".join(parts)

    def record_element(self, node: Node) -> None:
        if not node.bid or "disabled" in node.states:
            return
        if node.role not in ACTIONABLE_ROLES and not node.pointer:
            return
        options = [c.name for c in node.children if c.role == "option"]
        element = {
            "bid": node.bid,
            "role": node.role,
            "name": node.name,
            "editable": node.role in EDITABLE_ROLES or (node.role == "combobox" and not options),
        }
        if options:
            element["options"] = options
        self.elements.append(element)


def render_tree(
    snapshot: str, title: str, max_lines: int = 2000, max_name: int = 200, before: str = "", after: str = ""
) -> Tree:
    """BrowserGym-style tree text under a RootWebArea line, plus what the explorer and actions need.
    `before` and `after`: marker lines around the nodes (a viewport-first tree says what it left out)."""
    renderer = _Renderer(max_lines, max_name)
    roots = parse_snapshot(snapshot)
    if roots and roots[0].bid:
        renderer.main_prefix = frame_prefix(roots[0].bid)
        # The document body is "active" when nothing has the focus: that is no focused element.
        roots[0].states.pop("focused", None)
    for root in roots:
        renderer.node(root, 1)
    root_line = f"RootWebArea {_quote(title, max_name)}" + ("" if renderer.focused else ", focused")
    lines = [root_line, *([before] if before else []), *renderer.lines]
    if renderer.dropped:
        lines.append(
            f"[... {renderer.dropped} more nodes truncated: the tree is limited to {max_lines} lines;"
            " scroll to bring other parts of the page into view]"
        )
    if after:
        lines.append(after)
    text = "\n".join(lines)
    return Tree(
        text, renderer.focused, renderer.elements, renderer.refs, renderer.nodes, bool(renderer.dropped)
    )

"""A recorded page's HTML as our web observation tree (sandboxes/web/tree.py), for imported datasets.

The live web sandbox reads Chromium's accessibility tree through Playwright's AI-mode ARIA snapshot
and renders it with `sandboxes.web.tree.render_tree`. A public dataset such as Mind2Web keeps only
the page's HTML, so this module computes an approximation of that snapshot from the HTML (implicit
ARIA roles of the HTML-AAM mapping, accessible names from aria-label / label / alt / title /
placeholder / content, the states checked, selected, disabled, expanded, pressed, heading levels),
writes it in Playwright's snapshot syntax, and lets the sandbox's own renderer turn it into the
canonical text. Both sources thus end in one form: `[bid] role 'name', states` lines, tab-indented.

Mind2Web's HTML (https://huggingface.co/datasets/osunlp/Mind2Web; built from a CDP DOMSnapshot by
the authors' `src/data_utils/dom_utils.py`) differs from a browser's in ways handled here:
- text nodes are `<text>` elements; attribute names have `-` replaced by `_` (`aria_label`), and
  the DOM's live state is in added attributes: `input_value`, `input_checked`, `option_selected`,
  `is_clickable` (a click listener or a natively clickable element), and `bounding_box_rect`
  (`-1,-1,-1,-1` when the element has no layout box: `display: none`);
- every element carries `backend_node_id`, Chromium's node id, which becomes the element's bid.
Plain HTML with ordinary attributes and text also works (bids then come from `id_attribute` only).

What cannot be recovered from HTML, and is left out rather than guessed: CSS visibility other than
a missing layout box, `cursor: pointer` (an element is marked `clickable` only when the data says
`is_clickable`, has an `onclick`, or is named in `clickable_bids`), the focus, and names computed
from CSS pseudo-content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import unescape as html_unescape

import lxml.etree
import lxml.html

from sandboxes.web.tree import Tree, render_tree

MAX_TREE_LINES = 2000  # WebConfig.max_tree_lines: the live sandbox's limit
MAX_NAME_CHARS = 200  # WebConfig.max_name_chars

# Never part of the accessibility tree, with everything inside.
_SKIPPED = frozenset(
    {
        "head", "script", "style", "noscript", "template", "meta", "link", "title", "base", "param",
        "source", "track", "datalist", "object", "embed", "canvas", "map", "area", "audio", "video",
    }
)  # fmt: skip
_TEXT_TAGS = frozenset({"text", "#text"})
# Tags whose text runs into the surrounding text (their content flows inline): folded into one
# StaticText with their neighbours, as the browser's inline text boxes are.
_INLINE = frozenset(
    {
        "span", "b", "strong", "i", "em", "u", "small", "sup", "sub", "abbr", "code", "font", "mark",
        "s", "strike", "time", "bdi", "bdo", "cite", "q", "var", "kbd", "samp", "data", "wbr", "label",
        "big", "tt", "ins", "del",
    }
)  # fmt: skip
_LANDMARKS = {
    "nav": "navigation",
    "main": "main",
    "header": "banner",
    "footer": "contentinfo",
    "aside": "complementary",
    "dialog": "dialog",
    "p": "paragraph",
    "ul": "list",
    "ol": "list",
    "menu": "list",
    "li": "listitem",
    "table": "table",
    "tr": "row",
    "td": "cell",
    "th": "columnheader",
    "hr": "separator",
    "blockquote": "blockquote",
    "fieldset": "group",
    "figure": "figure",
    "article": "article",
    "textarea": "textbox",
    "button": "button",
    "progress": "progressbar",
    "meter": "meter",
    "summary": "button",
    "dl": "list",
    "dt": "term",
    "dd": "definition",
    "caption": "caption",
}
_INPUT_ROLES = {
    "button": "button",
    "submit": "button",
    "reset": "button",
    "image": "button",
    "file": "button",
    "checkbox": "checkbox",
    "radio": "radio",
    "search": "searchbox",
    "number": "spinbutton",
    "range": "slider",
}
# Roles named by their content (ARIA's "name from content"): a link's or a button's text is its name.
_NAME_FROM_CONTENT = frozenset(
    {
        "button", "link", "heading", "cell", "columnheader", "rowheader", "option", "tab", "menuitem",
        "menuitemcheckbox", "menuitemradio", "treeitem", "checkbox", "radio", "switch", "tooltip", "term",
    }
)  # fmt: skip
_VALUE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "slider"})
_NO_LAYOUT = "-1,-1,-1,-1"
_SPACES = re.compile(r"\s+")
_MARKUP = re.compile(r"<[^>]*>")


class HtmlTreeError(ValueError):
    """The HTML cannot be parsed into a document."""


@dataclass
class _Item:
    """One node of the snapshot being built: an element, or a run of text (`role` "text")."""

    role: str
    name: str = ""
    bid: str = ""
    states: list[str] = field(default_factory=list)  # "checked", "level=2", ...
    value: str = ""
    url: str = ""
    placeholder: str = ""
    pointer: bool = False
    children: list[_Item] = field(default_factory=list)


@dataclass
class Page:
    """A page read from HTML: the rendered tree, the title, and the bids it shows."""

    tree: Tree
    title: str
    bids: frozenset[str]
    root: lxml.etree._Element = field(repr=False)
    id_attribute: str = "backend_node_id"

    def shown_bid(self, bid: str) -> str | None:
        """`bid` when the tree shows it, else its nearest shown ancestor's (a click on an icon's
        <path> lands on the button around it), else None when neither is in the page."""
        if bid in self.bids:
            return bid
        found = self.root.xpath(f"//*[@{self.id_attribute}=$bid]", bid=bid) if self.id_attribute else []
        for element in found[:1]:
            for ancestor in element.iterancestors():
                candidate = ancestor.get(self.id_attribute, "").strip()
                if candidate in self.bids:
                    return candidate
        return None


def _attr(element: lxml.etree._Element, *names: str) -> str:
    """The first non-empty of the attributes `names`, in the DOM's spelling or Mind2Web's (`-` as `_`)."""
    for name in names:
        for spelling in (name, name.replace("-", "_")):
            value = element.get(spelling)
            if value is not None and value.strip():
                return _SPACES.sub(" ", value).strip()
    return ""


def _flag(element: lxml.etree._Element, *names: str) -> bool:
    for name in names:
        for spelling in (name, name.replace("-", "_")):
            value = element.get(spelling)
            if value is not None and value.strip().lower() not in ("false", "0"):
                return True
    return False


def _tag(element: lxml.etree._Element) -> str:
    tag = element.tag
    return tag.lower() if isinstance(tag, str) else ""


def _text_of(element: lxml.etree._Element) -> str:
    """The element's visible text, whitespace collapsed (skipped and layout-less parts left out)."""
    pieces: list[str] = []

    def walk(node: lxml.etree._Element) -> None:
        tag = _tag(node)
        if tag in _SKIPPED or _hidden(node):
            return
        if node.text:
            pieces.append(node.text)
        for child in node:
            walk(child)
            if child.tail:
                pieces.append(child.tail)
        if tag == "img":
            pieces.append(_attr(node, "alt"))

    walk(element)
    return _SPACES.sub(" ", " ".join(pieces)).strip()


def _hidden(element: lxml.etree._Element) -> bool:
    """Left out of the accessibility tree with its subtree: no layout box, `hidden`, `aria-hidden`,
    a hidden input. An <option> has no box of its own (the list opens in a popup) and stays."""
    tag = _tag(element)
    if tag in ("option", "optgroup"):
        return False
    if element.get("bounding_box_rect", "").replace(" ", "") == _NO_LAYOUT and tag not in _TEXT_TAGS:
        return not _has_layout_below(element)
    if element.get("hidden") is not None or _attr(element, "aria-hidden").lower() == "true":
        return True
    return tag == "input" and _attr(element, "type").lower() == "hidden"


def _has_layout_below(element: lxml.etree._Element) -> bool:
    """`display: contents` boxes nothing itself but lays out its children."""
    for child in element.iterdescendants():
        rect = child.get("bounding_box_rect")
        if rect is not None and rect.replace(" ", "") != _NO_LAYOUT:
            return True
    return False


class _Builder:
    def __init__(self, id_attribute: str, clickable_bids: frozenset[str]) -> None:
        self.id_attribute = id_attribute
        self.clickable_bids = clickable_bids
        self.labels: dict[str, str] = {}  # element id -> the text of its <label for=...>
        self.bids: set[str] = set()

    def collect_labels(self, root: lxml.etree._Element) -> None:
        for label in root.iter("label"):
            target = label.get("for")
            if target and target not in self.labels:
                self.labels[target] = _text_of(label)

    def children(self, element: lxml.etree._Element) -> list[_Item]:
        """The items of `element`'s content, text runs merged across inline elements."""
        items: list[_Item] = []
        if element.text and _tag(element) not in _TEXT_TAGS:
            _add_text(items, element.text)
        for child in element:
            if isinstance(child.tag, str):
                self.element(child, items)
            if child.tail:
                _add_text(items, child.tail)
        return items

    def element(self, element: lxml.etree._Element, out: list[_Item]) -> None:
        tag = _tag(element)
        if tag in _TEXT_TAGS:
            if not _hidden(element):
                _add_text(out, element.text or "")
            return
        if tag in _SKIPPED or _hidden(element):
            return
        if tag == "br":
            out.append(_Item(role="break"))
            return
        role = self.role(element, tag)
        bid = element.get(self.id_attribute, "").strip() if self.id_attribute else ""
        pointer = bool(bid) and (
            bid in self.clickable_bids or _flag(element, "is_clickable") or element.get("onclick") is not None
        )
        if role in ("svg", "img") and not self.image_wanted(element, pointer):
            return
        if role == "generic" and not pointer and not _attr(element, "aria-label"):
            # A plain <div>/<span>: its content joins the parent's (the renderer would fold it too);
            # a block boundary keeps the text of one block from running into the next.
            inner = self.children(element)
            if tag not in _INLINE:
                out.append(_Item(role="break"))
            for item in inner:
                if item.role == "text":
                    _add_text(out, item.name)
                else:
                    out.append(item)
            if tag not in _INLINE:
                out.append(_Item(role="break"))
            return
        item = _Item(role="img" if role == "svg" else role, bid=bid, pointer=pointer)
        if bid:
            self.bids.add(bid)
        self.fill(item, element, tag)
        out.append(item)

    def image_wanted(self, element: lxml.etree._Element, pointer: bool) -> bool:
        """An image with no name says nothing unless it can be clicked."""
        return pointer or bool(_attr(element, "aria-label", "alt", "title"))

    def role(self, element: lxml.etree._Element, tag: str) -> str:
        explicit = _attr(element, "role", "aria-role").split(" ")[0].lower()
        if explicit in ("presentation", "none"):
            return "generic"
        if explicit and re.fullmatch(r"[a-z][a-z-]*", explicit):
            return explicit
        if tag == "a":
            return "link" if element.get("href") is not None else "generic"
        if tag == "input":
            kind = _attr(element, "type").lower()
            return _INPUT_ROLES.get(kind, "textbox")
        if tag == "select":
            return "listbox" if _flag(element, "multiple") else "combobox"
        if tag in ("option", "optgroup"):
            return "option" if tag == "option" else "group"
        if re.fullmatch(r"h[1-6]", tag):
            return "heading"
        if tag in ("img", "svg"):
            return tag
        if tag in ("section", "form") and _attr(element, "aria-label", "title"):
            return "region" if tag == "section" else "form"
        return _LANDMARKS.get(tag, "generic")

    def fill(self, item: _Item, element: lxml.etree._Element, tag: str) -> None:
        """The item's name, value, states and children."""
        role = item.role
        name = _attr(element, "aria-label")
        if not name and element.get("id") and element.get("id") in self.labels:
            name = self.labels[element.get("id", "")]
        if not name and tag in ("img", "svg", "area") or (not name and tag == "input" and role == "button"):
            name = _attr(element, "alt", "value", "title")
        if not name and tag == "option":
            name = _attr(element, "label")
        children = [] if tag in ("svg", "select", "textarea", "input") else self.children(element)
        if tag == "select":
            children = [self.option(o) for o in element.iter("option") if not _hidden(o)]
        if not name and role in _NAME_FROM_CONTENT:
            name = _text_of(element)
        if not name:
            name = _attr(element, "title", "aria-description")
        if role in _VALUE_ROLES and tag in ("input", "textarea"):
            item.placeholder = _attr(element, "placeholder")
            if not name:
                name = item.placeholder
            item.value = _attr(element, "input_value") or (
                _attr(element, "value") if tag == "input" else _text_of(element)
            )
        elif tag == "select":
            chosen = next((c.name for c in children if "selected" in c.states), "")
            item.value = chosen
        item.name = name
        if tag == "a" and role == "link":
            item.url = element.get("href", "")
        item.states = self.states(element, role, tag)
        texts_only = all(c.role in ("text", "break") for c in children)
        if role in _NAME_FROM_CONTENT and texts_only:
            children = []  # the text is the name already
        elif role not in _VALUE_ROLES and texts_only:
            text = " ".join(c.name for c in children if c.role == "text")
            children = []
            if text and text != name:
                item.value = text  # `- paragraph: text`: the renderer shows it as a StaticText child
        item.children = [c for c in children if c.role != "break"]

    def option(self, element: lxml.etree._Element) -> _Item:
        bid = element.get(self.id_attribute, "").strip() if self.id_attribute else ""
        if bid:
            self.bids.add(bid)
        name = _attr(element, "aria-label", "label") or _text_of(element)
        states = ["selected"] if _flag(element, "option_selected", "selected") else []
        if _flag(element, "disabled"):
            states.append("disabled")
        return _Item(role="option", name=name, bid=bid, states=states)

    def states(self, element: lxml.etree._Element, role: str, tag: str) -> list[str]:
        states = []
        if re.fullmatch(r"h[1-6]", tag) and role == "heading":
            states.append(f"level={tag[1]}")
        elif role == "heading" and _attr(element, "aria-level").isdigit():
            states.append(f"level={_attr(element, 'aria-level')}")
        checked = _attr(element, "aria-checked").lower()
        if checked == "mixed":
            states.append("checked=mixed")
        elif checked == "true" or (tag == "input" and _flag(element, "input_checked", "checked")):
            states.append("checked")
        if _attr(element, "aria-selected").lower() == "true" or (
            tag == "option" and _flag(element, "option_selected", "selected")
        ):
            states.append("selected")
        if _attr(element, "aria-pressed").lower() == "true":
            states.append("pressed")
        if _attr(element, "aria-expanded").lower() == "true":
            states.append("expanded")
        if _flag(element, "disabled") or _attr(element, "aria-disabled").lower() == "true":
            states.append("disabled")
        return states


def _add_text(items: list[_Item], text: str) -> None:
    text = _SPACES.sub(" ", text).strip()
    if not text:
        return
    if items and items[-1].role == "text":
        items[-1].name = f"{items[-1].name} {text}"
    else:
        items.append(_Item(role="text", name=text))


def _snapshot_lines(items: Iterable[_Item], depth: int, lines: list[str]) -> None:
    """Playwright's AI-mode snapshot syntax, which `sandboxes.web.tree.parse_snapshot` reads."""
    pad = "  " * depth
    for item in items:
        if item.role == "break":
            continue
        if item.role == "text":
            lines.append(f"{pad}- text: {json.dumps(item.name, ensure_ascii=False)}")
            continue
        key = item.role + (f" {json.dumps(item.name, ensure_ascii=False)}" if item.name else "")
        key += "".join(f" [{state}]" for state in item.states)
        if item.bid:
            key += f" [ref=e{item.bid}]"
        if item.pointer:
            key += " [cursor=pointer]"
        nested = item.children or item.url or item.placeholder
        value = f" {json.dumps(item.value, ensure_ascii=False)}" if item.value else ""
        lines.append(f"{pad}- {key}:{value}" if value or nested else f"{pad}- {key}")
        if item.url:
            lines.append(f"{pad}  - /url: {json.dumps(item.url, ensure_ascii=False)}")
        if item.placeholder:
            lines.append(f"{pad}  - /placeholder: {json.dumps(item.placeholder, ensure_ascii=False)}")
        _snapshot_lines(item.children, depth + 1, lines)


def parse_html(html: str) -> lxml.etree._Element:
    """The document's root element; HtmlTreeError when there is no document to read."""
    if not html or not html.strip():
        raise HtmlTreeError("the HTML is empty")
    try:
        root = lxml.html.document_fromstring(html.encode("utf-8", "replace"))
    except (lxml.etree.ParserError, ValueError) as exc:
        raise HtmlTreeError(f"the HTML cannot be parsed: {exc}") from exc
    if root is None or root.find("body") is None and len(root) == 0:
        raise HtmlTreeError("the HTML has no elements")
    return root


def page_title(root: lxml.etree._Element) -> str:
    """The <title>'s text. Its content is raw text to an HTML parser, so Mind2Web's `<text>` element
    inside it arrives as markup, which is taken off here."""
    title = root.find(".//title")
    if title is None:
        return ""
    text = _MARKUP.sub(" ", " ".join(title.itertext()))
    return _SPACES.sub(" ", html_unescape(text)).strip()


def render_page(
    html: str,
    *,
    id_attribute: str = "backend_node_id",
    clickable_bids: Iterable[str] = (),
    max_lines: int = MAX_TREE_LINES,
    max_name: int = MAX_NAME_CHARS,
) -> Page:
    """The page's tree as the web sandbox renders one (see the module doc). `id_attribute`: the
    attribute holding each element's bid; `clickable_bids`: elements known to take clicks."""
    root = parse_html(html)
    builder = _Builder(id_attribute, frozenset(str(b) for b in clickable_bids))
    builder.collect_labels(root)
    body = root.find("body")
    items = builder.children(body if body is not None else root)
    lines: list[str] = []
    _snapshot_lines(items, 0, lines)
    title = page_title(root)
    tree = render_tree("\n".join(lines), title, max_lines, max_name)
    return Page(tree=tree, title=title, bids=frozenset(builder.bids), root=root, id_attribute=id_attribute)

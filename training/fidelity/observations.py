"""Reading structure back out of observation text: the web page's header and tree, the search results.

The simulator fills a predicted observation's `data` from its text the way the real sandbox fills it
from the page or the engine (where that is cheap), and the fidelity metrics compare these parts. Both
read only the canonical text, so a prediction and a recording are parsed the same way. Text that does
not follow the form gives empty parts, never an error: a world model that breaks the form is measured,
not refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Web (BrowserGym-style, see sandboxes/web): "URL: ...", "Title: ...", "Tabs: ...", "Focused: ...",
# "Error: ..." header lines, a blank line, then one tree node a line, tab-indented by depth.
_HEADER_RE = re.compile(r"^(URL|Title|Tabs|Focused|Error):[ \t]?(.*)$")
_TAB_RE = re.compile(r"^\[(\d+)\]\s*(.*?)(\s*\(active\))?$")
_FOCUSED_RE = re.compile(r"^\[([^\]]+)\]$")
# A tree node: optional [bid], a role, an optional quoted name, then comma-separated properties.
_NODE_RE = re.compile(r"^(\t*)(?:\[([^\]\s]+)\]\s+)?([A-Za-z][\w-]*)(?:\s+'((?:[^'\\]|\\.)*)')?")
_BID_RE = re.compile(r"\[[^\]\s]+\]\s*")

# Search (see sandboxes/search/render.py): a summary line, then per result "[n] url" and its
# "Title: ", "Snippet: ", "Date: " lines; an extracted page opens with "Title: " and "URL: " lines.
_RESULT_RE = re.compile(r"^\s*\[(\d+)\]\s+(\S+)\s*$")
_FIELD_RE = re.compile(r"^(Title|Snippet|Date|URL):[ \t]?(.*)$")


# Actions a domain's sandbox answers in another format than its first observation's.
ACTION_FORMATS = {("search", "web_extractor"): "markdown"}


@dataclass
class WebPage:
    url: str = ""
    title: str = ""
    tabs: list[dict[str, Any]] = field(default_factory=list)
    focused_bid: str = ""
    error: str = ""
    tree: list[str] = field(default_factory=list)  # the node lines, indentation kept
    has_header: bool = False

    def data(self) -> dict[str, Any]:
        """The parts of the web sandbox's `data` that the text carries."""
        elements = []
        for line in self.tree:
            node = _NODE_RE.match(line)
            if node and node.group(2):
                elements.append({"bid": node.group(2), "role": node.group(3), "name": node.group(4) or ""})
        return {
            "url": self.url,
            "title": self.title,
            "tabs": self.tabs,
            "focused_bid": self.focused_bid,
            "last_action_error": self.error,
            "elements": elements,
        }


def parse_web(text: str) -> WebPage:
    page = WebPage()
    lines = text.split("\n")
    i = 0
    while i < len(lines) and (header := _HEADER_RE.match(lines[i])):
        page.has_header = True
        key, value = header.group(1), header.group(2).strip()
        if key == "URL":
            page.url = value
        elif key == "Title":
            page.title = value
        elif key == "Tabs":
            page.tabs = _tabs(value)
        elif key == "Focused":
            focused = _FOCUSED_RE.match(value)
            page.focused_bid = focused.group(1) if focused else ""
        else:
            page.error = value
        i += 1
    page.tree = [line.rstrip() for line in lines[i:] if line.strip()]
    return page


def _tabs(value: str) -> list[dict[str, Any]]:
    tabs = []
    for part in value.split(" | "):
        tab = _TAB_RE.match(part.strip())
        if tab:
            tabs.append({"index": int(tab.group(1)), "title": tab.group(2), "active": bool(tab.group(3))})
    return tabs


def without_bids(line: str) -> str:
    """A tree line with its `[bid]` removed: the same node whatever id the page gave it."""
    return _BID_RE.sub("", line, count=1)


def is_tree_node(line: str) -> bool:
    return _NODE_RE.match(line) is not None


@dataclass
class SearchResult:
    rank: int
    url: str
    lines: list[str] = field(default_factory=list)  # title, snippet, date, as shown

    def as_dict(self) -> dict[str, Any]:
        fields = {"title": "", "snippet": "", "date": ""}
        for line in self.lines:
            found = _FIELD_RE.match(line.strip())
            if found and found.group(1).lower() in fields:
                fields[found.group(1).lower()] = found.group(2).strip()
        return {"rank": self.rank, "url": self.url, **fields}


def parse_results(text: str) -> list[SearchResult]:
    """The numbered results of a result list, in order; [] for an extracted page or an error."""
    results: list[SearchResult] = []
    for line in text.split("\n"):
        found = _RESULT_RE.match(line)
        if found:
            results.append(SearchResult(int(found.group(1)), found.group(2)))
        elif results and line.strip():
            results[-1].lines.append(line)
    return results


def observation_data(domain: str, text: str) -> dict[str, Any]:
    """What a simulated observation's `data` holds for `domain`, read from its text ({} elsewhere)."""
    if domain == "web":
        return parse_web(text).data()
    if domain == "search":
        results = parse_results(text)
        if results:
            return {"results": [r.as_dict() for r in results]}
        return _page_head(text)
    return {}


def _page_head(text: str) -> dict[str, Any]:
    """An extracted page's title and URL, from the lines above its text."""
    head: dict[str, Any] = {}
    for line in text.split("\n"):
        found = _FIELD_RE.match(line)
        if not found:
            break
        if found.group(1) in ("Title", "URL"):
            head[found.group(1).lower()] = found.group(2).strip()
    return head

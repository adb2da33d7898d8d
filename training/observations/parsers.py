"""Reading structure back out of observation text: the web page's header and tree, the search results,
an MCP result's error flag and structured content, a SWE tool's exit status and diff.

The simulator fills a predicted observation's `data` from its text the way the real sandbox fills it
from the page or the engine (where that is cheap), and the fidelity metrics compare these parts. Both
read only the canonical text, so a prediction and a recording are parsed the same way. Text that does
not follow the form gives empty parts, never an error: a world model that breaks the form is measured,
not refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandboxes.domains import find_domain
from schemas.records import Action
from training.observations.trees import android_data, desktop_data

# Web (BrowserGym-style, see sandboxes/web): "URL: ...", "Title: ...", "Tabs: ...", "Focused: ...",
# "Error: ..." header lines (and "Loading:", "Blocked:", "Dialog:", "Download:" ones, not compared),
# a blank line, then one tree node a line, tab-indented by depth.
_HEADER_RE = re.compile(r"^(URL|Title|Tabs|Focused|Error|Loading|Blocked|Dialog|Download):[ \t]?(.*)$")
_TAB_RE = re.compile(r"^\[(\d+)\]\s*(.*?)(\s*\(active\))?$")
_FOCUSED_RE = re.compile(r"^\[([^\]]+)\]$")
# A tree node: optional [bid], a role, an optional quoted name, then comma-separated properties.
_NODE_RE = re.compile(r"^(\t*)(?:\[([^\]\s]+)\]\s+)?([A-Za-z][\w-]*)(?:\s+'((?:[^'\\]|\\.)*)')?")
_NODE_LINE_RE = re.compile(_NODE_RE.pattern + r"(?:,\s.*)?$")
_BID_RE = re.compile(r"\[[^\]\s]+\]\s*")

# Search (see sandboxes/search/render.py): a summary line, then per result "[n] url" and its
# "Title: ", "Snippet: ", "Date: " lines; an extracted page opens with "Title: " and "URL: " lines.
_RESULT_RE = re.compile(r"^\s*\[(\d+)\]\s+(\S+)\s*$")
_FIELD_RE = re.compile(r"^(Title|Snippet|Date|URL):[ \t]?(.*)$")


# MCP (sandboxes/mcp/README.md): a result is canonical JSON, {"content": [...], "structuredContent": {...}
# (when present), "isError": bool} or {"error": {"code", "message"}}; the first observation is
# "Connected to <name> <version>: N tools (a, b, c)."
_CONNECTED_RE = re.compile(r"^Connected to (.+?): (\d+) tools? \((.*)\)\.$")
# SWE: bash output ends with "[exit status: N]" or "[timed out after N s]"; long output carries an
# explicit truncation marker; edit answers with a unified diff or the error; read numbers lines as
# `cat -n` does.
_EXIT_RE = re.compile(r"^\[exit status: (-?\d+)\]$")
_TIMED_OUT_RE = re.compile(r"^\[timed out after (\d+(?:\.\d+)?) s\]$")
_TRUNCATED_RE = re.compile(r"\[\.\.\. \d+ (?:of \d+ )?bytes truncated \.\.\.\]")  # older ones lack "of M"


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
        elif key == "Error":
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
    """A whole node line as the web sandbox writes it (sandboxes/web/tree.py): role, name, then only
    comma-separated properties, so a sentence that happens to start with a word is no node."""
    return _NODE_LINE_RE.match(line) is not None


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


def _search_data(text: str, action: Action | None) -> dict[str, Any]:
    results = parse_results(text)
    return {"results": [r.as_dict() for r in results]} if results else _page_head(text)


def _mcp_data(text: str, action: Action | None) -> dict[str, Any]:
    tool = action.arguments.get("name", "") if action is not None else ""
    return mcp_data(text, tool if isinstance(tool, str) else "")


# The reader of each domain's observations, by the observation_format its record gives
# (sandboxes.domains); `action` (the step's) names the tool where the text does not.
_READERS: dict[str, Callable[[str, Action | None], dict[str, Any]]] = {
    "a11y_tree": lambda text, action: parse_web(text).data(),
    "search_results": _search_data,
    "mcp_result": _mcp_data,
    "swe_tool_result": lambda text, action: swe_data(text, action.kind if action is not None else ""),
    "desktop_a11y_tree": lambda text, action: desktop_data(text),
    "android_ui_tree": lambda text, action: android_data(text),
}


def observation_data(domain: str, text: str, action: Action | None = None) -> dict[str, Any]:
    """What a simulated observation's `data` holds for `domain`, read from its text ({} for a domain
    whose observations have no structure to read, such as the terminal's screen)."""
    spec = find_domain(domain)
    reader = _READERS.get(spec.observation_format) if spec else None
    return reader(text, action) if reader else {}


def parse_json(text: str) -> Any:
    """The JSON value of `text`, or None when it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # a model's output may nest deeper than the parser goes
        return None


def mcp_data(text: str, tool: str = "") -> dict[str, Any]:
    """An MCP observation's data: for a result, `tool`, `is_error`, `error` ({code, message} of a
    protocol error or timeout) and `structured_content`; for the first observation, the tool names."""
    value = parse_json(text)
    if isinstance(value, dict) and isinstance(value.get("error"), dict):
        error = value["error"]
        return {
            "tool": tool,
            "is_error": True,
            "error": {"code": error.get("code"), "message": str(error.get("message", ""))},
            "structured_content": None,
        }
    if isinstance(value, dict) and ("content" in value or "isError" in value):
        structured = value.get("structuredContent")
        return {
            "tool": tool,
            "is_error": value.get("isError") is True,
            "error": None,
            "structured_content": structured if isinstance(structured, dict) else None,
        }
    connected = _CONNECTED_RE.match(text.strip())
    if connected:
        names = [n.strip() for n in connected.group(3).split(",") if n.strip()]
        return {"tools": names}
    return {}


def result_kind(value: Any) -> str | None:
    """ "protocol_error", "tool_error" or "ok" for an MCP result object; None for anything else."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("error"), dict):
        return "protocol_error"
    if "content" in value or "isError" in value:
        return "tool_error" if value.get("isError") is True else "ok"
    return None


def is_diff(text: str) -> bool:
    return text.startswith(("--- ", "diff --git"))


def is_numbered_listing(text: str) -> bool:
    """A file as `read` shows it: every non-empty line starts with its right-aligned number and a tab."""
    lines = [line for line in text.split("\n") if line.strip()]
    return bool(lines) and all(_numbered(line) for line in lines)


def _numbered(line: str) -> bool:
    number, tab, _ = line.partition("\t")
    return bool(tab) and number.strip().isdigit() and number == number.strip().rjust(6)


def swe_status(text: str) -> tuple[int | None, bool]:
    """(exit status, timed out) from a bash observation's last line; (None, False) without one."""
    last = text.rstrip("\n").rsplit("\n", 1)[-1]
    found = _EXIT_RE.match(last)
    if found:
        return int(found.group(1)), False
    return None, _TIMED_OUT_RE.match(last) is not None


def swe_data(text: str, tool: str = "") -> dict[str, Any]:
    """A SWE tool observation's data: `tool` (the action's, else what the text's form says),
    `exit_status`, `timed_out`, `truncated`, `error` (empty when fine) and, for an edit, `diff`."""
    exit_status, timed_out = swe_status(text)
    if not tool:
        if exit_status is not None or timed_out:
            tool = "bash"
        elif is_diff(text):
            tool = "edit"
        elif is_numbered_listing(text):
            tool = "read"
    diff = text if tool == "edit" and is_diff(text) else ""
    failed = (tool == "edit" and not diff) or (tool == "read" and text.startswith("Error"))
    data: dict[str, Any] = {
        "tool": tool,
        "exit_status": exit_status,
        "timed_out": timed_out,
        "truncated": _TRUNCATED_RE.search(text) is not None,
        "error": text.strip() if failed else "",
    }
    if tool == "edit":
        data["diff"] = diff
    return data


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

"""The explorer's memory of values seen in an episode, so later calls reuse them (chaining).

Every value is filed under a role: a path the filesystem server listed, a commit hash `git_log`
printed, an entity name the memory server returned, a timezone, a URL. A property of a later call
asks for the values of its role, chosen by the property's name and description: `path` and
`source` want paths, `revision` wants hashes and branch names, `entityName` and `names` want
names. Values come from the task (metadata "values"), from the arguments the explorer itself sent
(a created entity is queried later) and from results: structured content, JSON in text content,
and patterns in plain text. Everything is kept in first-seen order, so a seed replays exactly.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

# Role of a property, from the words of its name (first match wins), then its description.
_ROLE_WORDS: list[tuple[str, frozenset[str]]] = [
    (role, frozenset(words.split()))
    for role, words in [
        ("timezone", "timezone tz zone"),
        ("clock", "time clock"),
        ("date", "timestamp date since until before after"),
        ("url", "url uri link href"),
        ("kind", "type kind category mode"),
        ("revision", "revision sha commit target contains ref"),
        ("branch", "branch"),
        ("repository", "repository repo"),
        ("path", "path file source destination directory dir folder"),
        ("line", "old"),
        ("name", "name entity from to id key title label"),
        ("query", "query pattern keyword term filter search"),
        ("text", "message content text observation body note comment description"),
    ]
]
_DESCRIPTION_ROLES = (("timezone", "iana"), ("clock", "hh:mm"), ("date", "iso 8601"), ("url", "url"))
_QUOTED = re.compile(r"'([^'\s][^'\n]{0,40}?)'|\"([^\"\s][^\"\n]{0,40}?)\"")
_NAME_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")

TIMEZONES = [
    "Etc/UTC", "Europe/London", "Europe/Paris", "Europe/Berlin", "America/New_York", "America/Chicago",
    "America/Los_Angeles", "America/Sao_Paulo", "Asia/Tokyo", "Asia/Kolkata", "Asia/Shanghai",
    "Australia/Sydney", "Africa/Nairobi", "Pacific/Auckland",
]  # fmt: skip
_STARTERS: dict[str, list[str]] = {
    "timezone": TIMEZONES,
    "clock": ["09:00", "12:30", "17:45", "23:15"],
    "date": ["2024-01-01", "2023-06-01T08:00:00", "2 weeks ago", "yesterday"],
    "revision": ["HEAD", "HEAD~1"],
    "kind": ["person", "project", "organization", "event", "tool", "works_on", "knows", "uses"],
    "name": ["Alice", "Bob_Martin", "Project_Apollo", "Acme_Corp", "Weekly_Sync"],
    "text": ["Initial draft", "Fix typo in the summary", "Meets on Tuesdays", "Prefers email"],
    "query": ["notes", "project", "Alice", "TODO"],
}
_DIRECTORY_TOOL_WORDS = frozenset("directory directories dir tree list search find".split())
# Pages an agent guesses on a site it has seen (some exist, most answer 404).
_GUESSED_PAGES = ("/index.html", "/about.html", "/robots.txt", "/data.json")
_NEW_NAMES = ("notes.txt", "draft.md", "todo.txt", "report", "archive")

_TIMEZONE = re.compile(
    r"\b(?:Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)/[A-Za-z_]+"
    r"(?:/[A-Za-z_]+)?\b"
)
_LINK = re.compile(r"\]\(([^)\s]+)\)|href=\"([^\"]+)\"")
_URL = re.compile(r"https?://[^\s\"'<>)\]]+")
_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
_PATH = re.compile(r"(?<![\w:/.])/(?:[\w.@+-]+/)*[\w.@+-]+/?")
# `[FILE] todo.txt`, and `[FILE] todo.txt     42 B` from list_directory_with_sizes.
_LISTING = re.compile(r"^\s*\[(FILE|DIR)\]\s+(\S(?:.*?\S)?)(?:\s{2,}.*)?\s*$", re.MULTILINE)
# Files a version-control answer names relative to its repository: diff headers, `git status` lines.
_CHANGED_FILE = re.compile(
    r"^(?:diff --git a/(\S+) b/|\s+(?:modified|new file|deleted|renamed):\s+(\S+)$)", re.MULTILINE
)
_BRANCH = re.compile(r"^(?:[*+ ] |On branch )([\w./-]+)$", re.MULTILINE)
_CAP = 60  # values kept per role: enough variety, bounded memory in long episodes


def name_words(name: str) -> list[str]:
    """`entityName` -> ["entity", "name"]; `repo_path` -> ["repo", "path"]."""
    return [word.lower() for word in _NAME_WORD.findall(name)]


def role_of(name: str, schema: dict[str, Any]) -> str:
    """The role of a property called `name` with `schema` ("" when none fits)."""
    words = set(name_words(name))
    for role, role_words in _ROLE_WORDS:
        if words & role_words:
            return role
    description = str(schema.get("description", "")).lower()
    for role, word in _DESCRIPTION_ROLES:
        if word in description:
            return role
    if schema.get("format") in ("uri", "url"):
        return "url"
    return ""


class ValuePool:
    """Values by role, first-seen order, newest kept when a role is full."""

    def __init__(self) -> None:
        self._values: dict[str, list[str]] = {}

    def add(self, role: str, value: Any) -> None:
        if not isinstance(value, str) or not value.strip() or len(value) > 300:
            return
        values = self._values.setdefault(role, [])
        if value in values:
            return
        values.append(value)
        del values[:-_CAP]

    def get(self, role: str) -> list[str]:
        return list(self._values.get(role, []))

    def suggest(self, name: str, schema: dict[str, Any], tool: str = "") -> tuple[list[str], list[str]]:
        """(values the episode saw for the property's role, plausible values for it). A path for a
        tool whose name speaks of directories (list_directory, directory_tree, search_files) is a
        directory seen, for any other tool a file seen; new names inside the directories seen are
        plausible, for calls that create something."""
        role = role_of(name, schema)
        # Examples the description quotes ("'local', 'remote' or 'all'", "e.g. 'Europe/London'").
        quoted = [a or b for a, b in _QUOTED.findall(str(schema.get("description", "")))]
        if role == "kind" and quoted:
            return quoted, quoted  # an enum written in prose
        starters = list(dict.fromkeys(quoted + _STARTERS.get(role, [])))
        if role == "revision":
            return self.get("revision") + self.get("branch"), starters
        if role in ("path", "repository"):
            directories = self.get("directory") + self.get("repository")
            if role == "repository":  # a server's working directory is often its repository
                return self.get("repository") or directories, directories or ["."]
            fresh = [f"{d.rstrip('/')}/{new}" for d in directories[:3] for new in _NEW_NAMES[:2]]
            fresh = fresh or ["."]
            wants_directory = set(name_words(tool)) & _DIRECTORY_TOOL_WORDS
            files = [p for p in self.get("path") if p not in directories]
            return (directories or files) if wants_directory else (files or directories), fresh
        if role == "url":
            guesses = [urllib.parse.urljoin(u, page) for u in self.get("url")[:2] for page in _GUESSED_PAGES]
            return self.get(role), guesses + starters
        return self.get(role), starters

    def roles(self) -> dict[str, list[str]]:
        return {role: list(values) for role, values in self._values.items()}

    # -- harvesting -----------------------------------------------------------------------------

    def add_arguments(self, arguments: dict[str, Any]) -> None:
        """Values the explorer sent itself: an entity it created is one it may open later."""
        _walk(arguments, "", self)

    def add_result(self, text: str, structured: Any, sent: dict[str, Any]) -> None:
        """Values from one observation text (the sandbox's JSON envelope): structured content, JSON
        inside text items, patterns in text and error messages. `sent` are the call's arguments:
        a listing's entries are relative to the path it listed."""
        if structured is not None:
            _walk(structured, "", self)
        envelope = _json_or_none(text)
        failed = not isinstance(envelope, dict) or "error" in envelope or bool(envelope.get("isError"))
        sent_strings = {v for v in sent.values() if isinstance(v, str)}
        base = sent.get("path") if isinstance(sent.get("path"), str) else None
        for chunk in _text_chunks(envelope):
            parsed = _json_or_none(chunk) if chunk[:1] in "[{" else None
            if parsed is not None:
                _walk(parsed, "", self)
                if base:
                    self._add_tree(parsed, base)
            else:
                self.add_text(chunk, base=base, sent=sent_strings, lines=not failed)
                if isinstance(sent.get("url"), str) and not failed:
                    self._add_links(chunk, sent["url"])

    def _add_links(self, text: str, page: str) -> None:
        """Links of a fetched page (markdown or HTML), made absolute against the page's URL."""
        for markdown, html in _LINK.findall(text):
            target = urllib.parse.urljoin(page, markdown or html)
            if target.startswith(("http://", "https://")):
                self.add("url", urllib.parse.urldefrag(target).url)

    def _add_tree(self, node: Any, base: str, depth: int = 0) -> None:
        """Paths from a JSON directory tree ([{"name", "type", "children"}]) listed under `base`."""
        if depth > 8:
            return
        for item in node if isinstance(node, list) else []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                path = f"{base.rstrip('/')}/{item['name']}"
                is_directory = "children" in item or item.get("type") == "directory"
                self.add("directory" if is_directory else "path", path)
                self._add_tree(item.get("children"), path, depth + 1)

    def add_text(
        self, text: str, base: str | None = None, sent: set[str] | None = None, lines: bool = False
    ) -> None:
        """Values in plain text. `base`: the path a listing is relative to; `sent`: the call's own
        values, which an answer repeats ("/etc/passwd not in /workdir" makes only the second a
        directory); `lines`: keep the text's lines (a file's content, for a later edit)."""
        for zone in _TIMEZONE.findall(text):
            self.add("timezone", zone)
        for url in _URL.findall(text):
            if url.rstrip(".,;:") not in (sent or set()):
                self.add("url", url.rstrip(".,;:"))
        for digest in _HASH.findall(text):
            self.add("revision", digest)
        # A path in a text about directories ("Allowed directories:", "created directory") is a
        # directory; in one about repositories ("outside the allowed repository '...'"), a repository.
        lowered = text.lower()
        container = "directory" if "director" in lowered else "repository" if "repositor" in lowered else ""
        for path in _PATH.findall(text):
            if len(path) > 2 and path not in (sent or set()):  # a path the call named is known already
                self.add(
                    container or ("directory" if path.endswith("/") else "path"), path.rstrip("/") or "/"
                )
        for changed in _CHANGED_FILE.findall(text):
            self.add("path", changed[0] or changed[1])
        for branch in _BRANCH.findall(text):
            self.add("branch", branch)
        if base:
            for kind, entry in _LISTING.findall(text):
                self.add("directory" if kind == "DIR" else "path", f"{base.rstrip('/')}/{entry}")
        for line in text.splitlines()[:40] if lines else []:
            if 3 <= len(line.strip()) <= 120 and not _LISTING.match(line):
                self.add("line", line.strip())


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _text_chunks(envelope: Any) -> list[str]:
    """The text items of a result ({"content": [{"type": "text", "text": ...}]}) or its error message."""
    if not isinstance(envelope, dict):
        return []
    error = envelope.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return [error["message"]]
    items = envelope.get("content") if isinstance(envelope.get("content"), list) else []
    texts = [item.get("text") for item in items if isinstance(item, dict)]
    return [t for t in texts if isinstance(t, str)]


def _walk(node: Any, key: str, pool: ValuePool, depth: int = 0) -> None:
    """File every string under its key's role (a `name` is a name, a `path` a path), and look for
    patterns in it (a hash, a URL, a timezone)."""
    if depth > 8:
        return
    if isinstance(node, dict):
        for child_key, child in node.items():
            _walk(child, str(child_key), pool, depth + 1)
    elif isinstance(node, list):
        singular = key[:-1] if key.endswith("s") else key
        for child in node[:100]:
            _walk(child, singular, pool, depth + 1)
    elif isinstance(node, str):
        role = role_of(key, {})
        if role and role not in ("text", "line", "clock", "query"):
            pool.add(role, node)
        pool.add_text(node)

"""`read` and `edit` on the workspace, from the host side.

Every path is resolved (symlinks and `..` included) before use and refused unless it stays inside
the repository root, so a link the agent made with bash cannot lead read/edit out of the workspace.
Only regular files are opened, without following a last-component link and without blocking (a
FIFO made in the sandbox must not hang the host).
"""

from __future__ import annotations

import difflib
import os
import stat
from dataclasses import dataclass

NO_NEWLINE = "\\ No newline at end of file\n"


class ToolError(Exception):
    """What the agent is told: the tool did nothing."""


@dataclass
class ToolOutput:
    text: str
    truncated: bool = False
    diff: str = ""
    error: str = ""


def bound(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to about `limit` UTF-8 bytes: head and tail around a `[... N bytes truncated ...]`
    marker line."""
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= limit:
        return text, False
    half = limit // 2
    head, tail = raw[:half], raw[len(raw) - half :]
    cut = len(raw) - len(head) - len(tail)
    marker = f"\n[... {cut} bytes truncated ...]\n"
    return head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace"), True


class Workspace:
    """The repository root on the host; `aliases` are the absolute roots the agent may write
    (`/repo` inside the sandbox). Created files and directories get `owner` (the sandbox's user)."""

    def __init__(
        self, root: str, aliases: tuple[str, ...], owner: tuple[int, int] | None, max_file_bytes: int
    ) -> None:
        self.root = os.path.realpath(root)
        self.aliases = tuple(a.rstrip("/") or "/" for a in aliases)
        self.owner = owner
        self.max_file_bytes = max_file_bytes

    def resolve(self, path: str) -> tuple[str, str]:
        """(host path, path relative to the root) of an agent's path; ToolError if outside."""
        if "\0" in path:
            raise ToolError(f"Error: invalid path {path!r}")
        joined = path
        if os.path.isabs(path):
            for alias in (*self.aliases, self.root):
                if path == alias or path.startswith(alias.rstrip("/") + "/"):
                    joined = os.path.join(self.root, path[len(alias) :].lstrip("/"))
                    break
            else:
                raise ToolError(f"Error: {path} is outside the repository")
        else:
            joined = os.path.join(self.root, path)
        real = os.path.realpath(joined)
        if real != self.root and not real.startswith(self.root + os.sep):
            raise ToolError(f"Error: {path} is outside the repository")
        rel = os.path.relpath(real, self.root)
        return real, "." if rel == "." else rel

    def _read_text(self, real: str, shown: str) -> str:
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise ToolError(f"Error: no such file: {shown}") from None
        except OSError as exc:
            raise ToolError(f"Error: cannot open {shown}: {exc.strerror}") from None
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ToolError(f"Error: {shown} is not a regular file")
            if info.st_size > self.max_file_bytes:
                raise ToolError(
                    f"Error: {shown} is {info.st_size} bytes, over the {self.max_file_bytes}-byte limit; "
                    "use bash (head, sed -n) to look at parts of it"
                )
            raw = f.read(self.max_file_bytes + 1)
        if b"\0" in raw[:8192]:
            raise ToolError(f"Error: {shown} is a binary file ({len(raw)} bytes)")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"Error: {shown} is not UTF-8 text") from None

    def read(self, path: str, start_line: int | None, end_line: int | None, limit: int) -> ToolOutput:
        real, rel = self.resolve(path)
        if os.path.isdir(real):
            if start_line is not None or end_line is not None:
                raise ToolError(f"Error: {rel} is a directory; start_line/end_line apply to files")
            return ToolOutput(*bound(self.listing(real), limit))
        lines = self._read_text(real, rel).splitlines()
        first = start_line or 1
        last = min(end_line or len(lines), len(lines))
        if lines and first > len(lines) or not lines and first > 1:
            raise ToolError(f"Error: start_line {first} is past the end of {rel} ({len(lines)} lines)")
        numbered = "".join(f"{n:6}\t{lines[n - 1]}\n" for n in range(first, last + 1))
        return ToolOutput(*bound(numbered, limit))

    def listing(self, real: str) -> str:
        entries = []
        with os.scandir(real) as found:
            for entry in found:
                is_dir = entry.is_dir(follow_symlinks=False)
                entries.append(entry.name + ("/" if is_dir else ""))
        return "".join(f"{name}\n" for name in sorted(entries))

    def _write(self, real: str, text: str, new: bool) -> None:
        flags = os.O_WRONLY | os.O_NOFOLLOW | (os.O_CREAT | os.O_EXCL if new else os.O_TRUNC)
        fd = os.open(real, flags, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        if new and self.owner is not None:
            os.chown(real, *self.owner)

    def _make_parents(self, real: str) -> None:
        missing = []
        parent = os.path.dirname(real)
        while not os.path.isdir(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        for directory in reversed(missing):
            os.mkdir(directory, 0o755)
            if self.owner is not None:
                os.chown(directory, *self.owner)

    def edit(self, arguments: dict) -> ToolOutput:
        command = arguments["command"]
        real, rel = self.resolve(arguments["path"])
        if command == "create":
            if os.path.lexists(real):
                raise ToolError(f"Error: {rel} already exists; use str_replace or insert to change it")
            try:
                self._make_parents(real)
            except OSError as exc:
                raise ToolError(f"Error: cannot create {rel}: {exc.strerror}") from None
            self._write(real, arguments["file_text"], new=True)
            return self._diffed("", arguments["file_text"], rel, created=True)
        if os.path.isdir(real):
            raise ToolError(f"Error: {rel} is a directory")
        old = self._read_text(real, rel)
        new = _replace(old, arguments, rel) if command == "str_replace" else _insert(old, arguments, rel)
        self._write(real, new, new=False)
        return self._diffed(old, new, rel, created=False)

    @staticmethod
    def _diffed(old: str, new: str, rel: str, created: bool) -> ToolOutput:
        diff = unified_diff(old, new, rel, created)
        return ToolOutput(diff or f"No change to {rel}.\n", diff=diff)


def _replace(old: str, arguments: dict, rel: str) -> str:
    needle, replacement = arguments["old_str"], arguments.get("new_str", "")
    first = old.find(needle)
    if first < 0:
        raise ToolError(f"Error: old_str not found in {rel}")
    if old.find(needle, first + 1) >= 0:
        count = _count_overlapping(old, needle)
        raise ToolError(f"Error: old_str found {count} times in {rel} (must be unique)")
    return old[:first] + replacement + old[first + len(needle) :]


def _count_overlapping(text: str, needle: str) -> int:
    count, at = 0, text.find(needle)
    while at >= 0:
        count, at = count + 1, text.find(needle, at + 1)
    return count


def _insert(old: str, arguments: dict, rel: str) -> str:
    lines = old.splitlines(keepends=True)
    at = arguments["insert_line"]
    if at > len(lines):
        raise ToolError(f"Error: insert_line {at} is out of range for {rel} (0-{len(lines)})")
    added = arguments["new_str"]
    if added and not added.endswith("\n"):
        added += "\n"
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    return "".join(lines[:at]) + added + "".join(lines[at:])


def unified_diff(old: str, new: str, rel: str, created: bool = False) -> str:
    """`git diff`-style unified diff, with git's marker for a last line that has no newline."""
    produced = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if created else f"a/{rel}",
        tofile=f"b/{rel}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in produced)

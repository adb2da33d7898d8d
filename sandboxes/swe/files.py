"""`read` and `edit` on the workspace, from the host side.

Every path is resolved (symlinks and `..` included) before use and refused unless it stays inside
the repository root, so a link the agent made with bash cannot lead read/edit out of the workspace.
Only regular files are opened, without following a last-component link and without blocking (a
FIFO made in the sandbox must not hang the host).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from sandboxes.swe.text import bound, byte_lines, numbered_page, split_lines, unified_diff


class ToolError(Exception):
    """What the agent is told: the tool did nothing."""


@dataclass
class ToolOutput:
    text: str
    truncated: bool = False
    diff: str = ""
    error: str = ""


def _plain_path(root: str, parts: list[str]) -> str | None:
    """root/parts when no part is `..` and none of the existing ones is a symlink, else None.
    Cheaper than os.path.realpath, which re-checks every component of the root too."""
    real = root
    for part in parts:
        if part == "..":
            return None
        real = f"{real}/{part}"
        try:
            if stat.S_ISLNK(os.lstat(real).st_mode):
                return None
        except FileNotFoundError:
            continue  # what does not exist yet cannot be a link; a later `..` is caught above
        except NotADirectoryError:
            continue
    return real


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
        relative = path
        if path.startswith("/"):
            for alias in (*self.aliases, self.root):
                if path == alias or path.startswith(alias.rstrip("/") + "/"):
                    relative = path[len(alias) :]
                    break
            else:
                raise ToolError(f"Error: {path} is outside the repository")
        parts = [part for part in relative.split("/") if part and part != "."]
        real = _plain_path(self.root, parts)
        if real is None:  # a `..` or a symlink on the way: resolve it all, then check where it led
            real = os.path.realpath(os.path.join(self.root, *parts))
            if real != self.root and not real.startswith(self.root + os.sep):
                raise ToolError(f"Error: {path} is outside the repository")
        rel = real[len(self.root) + 1 :]
        return real, rel or "."

    @staticmethod
    def _open(real: str, shown: str) -> tuple[int, os.stat_result]:
        """An open descriptor of `real` and its status; ToolError when it cannot be opened."""
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise ToolError(f"Error: no such file: {shown}") from None
        except OSError as exc:
            raise ToolError(f"Error: cannot open {shown}: {exc.strerror}") from None
        return fd, os.fstat(fd)

    def _content(self, fd: int, info: os.stat_result, shown: str, upto: int | None = None) -> bytes:
        """A regular text file's content, or its first `upto` bytes; ToolError for anything else.
        Only whole reads are refused for size."""
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(f"Error: {shown} is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise ToolError(f"Error: {shown} is not a regular file")
        if upto is None and info.st_size > self.max_file_bytes:
            raise ToolError(
                f"Error: {shown} is {info.st_size} bytes, over the {self.max_file_bytes}-byte limit; "
                "use bash (head, sed -n) to look at parts of it"
            )
        # What fstat announced, plus one byte to see growth (a file object's read(n) would
        # allocate n bytes up front).
        wanted = info.st_size + 1 if upto is None else upto
        chunks = []
        while wanted > 0:
            chunk = os.read(fd, wanted)
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
        raw = b"".join(chunks)
        if upto is None and len(raw) > self.max_file_bytes:
            raise ToolError(f"Error: {shown} is over the {self.max_file_bytes}-byte limit")
        if b"\0" in raw[:8192]:
            raise ToolError(f"Error: {shown} is a binary file ({info.st_size} bytes)")
        return raw

    def _read_text(self, real: str, shown: str) -> str:
        """A file to edit: strictly UTF-8, so that writing it back changes only what the edit says."""
        fd, info = self._open(real, shown)
        try:
            return self._content(fd, info, shown).decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"Error: {shown} is not UTF-8 text; edit it with bash") from None
        finally:
            os.close(fd)

    def read(self, path: str, start_line: int | None, end_line: int | None, limit: int) -> ToolOutput:
        real, rel = self.resolve(path)
        fd, info = self._open(real, rel)
        try:
            if stat.S_ISDIR(info.st_mode):
                if start_line is not None or end_line is not None:
                    raise ToolError(f"Error: {rel} is a directory; start_line/end_line apply to files")
                return ToolOutput(*bound(self.listing(real), limit))
            if start_line is None and end_line is None:
                # A page from the top: only the first `limit` bytes are read, however large the file.
                raw = self._content(fd, info, rel, upto=limit)
                return ToolOutput(*_first_page(raw, info.st_size, limit))
            raw = self._content(fd, info, rel)
        finally:
            os.close(fd)
        lines = byte_lines(raw)
        first = start_line or 1
        last = min(end_line or len(lines), len(lines))
        if lines and first > len(lines) or not lines and first > 1:
            raise ToolError(f"Error: start_line {first} is past the end of {rel} ({len(lines)} lines)")
        chosen = lines[first - 1 : last]
        raw_len = sum(map(len, chosen)) + len(chosen)
        if last == len(lines) and raw and not raw.endswith(b"\n"):
            raw_len -= 1  # the file's last line has no newline
        return ToolOutput(*numbered_page(chosen, first, limit, raw_len, 0))

    def listing(self, real: str) -> str:
        entries = []
        with os.scandir(real) as found:
            for entry in found:
                is_dir = entry.is_dir(follow_symlinks=False)
                entries.append(entry.name + ("/" if is_dir else ""))
        return "".join(f"{name}\n" for name in sorted(entries))

    def _write(self, real: str, text: str, new: bool) -> None:
        # Overwrite, then cut to the new length: truncating to zero first (O_TRUNC) makes ext4
        # flush the file's blocks on close (its auto_da_alloc heuristic), which costs milliseconds.
        flags = os.O_WRONLY | os.O_NOFOLLOW | (os.O_CREAT | os.O_EXCL if new else 0)
        data = text.encode("utf-8")
        fd = os.open(real, flags, 0o644)
        try:
            written = os.write(fd, data)
            while written < len(data):
                written += os.write(fd, data[written:])
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
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
            text = arguments["file_text"]
            return self._diffed("", text, rel, created=True, span=(0, 0, len(text)))
        old = self._read_text(real, rel)
        change = _replace if command == "str_replace" else _insert
        new, span = change(old, arguments, rel)
        self._write(real, new, new=False)
        _drop_cached_bytecode(real)
        return self._diffed(old, new, rel, created=False, span=span)

    @staticmethod
    def _diffed(
        old: str, new: str, rel: str, created: bool, span: tuple[int, int, int] | None = None
    ) -> ToolOutput:
        diff = unified_diff(old, new, rel, created, span)
        return ToolOutput(diff or f"No change to {rel}.\n", diff=diff)


def _drop_cached_bytecode(real: str) -> None:
    """Python trusts a .pyc while the source's mtime (in whole seconds) and size match, so an
    edit of the same length within the second of the last run (`a + b` to `a - b` right after
    pytest) would still run the old code. The edit tool removes the file's cached bytecode."""
    if not real.endswith(".py"):
        return
    cache = os.path.join(os.path.dirname(real), "__pycache__")
    stem = os.path.basename(real)[:-3] + "."
    try:
        names = [n for n in os.listdir(cache) if n.startswith(stem) and n.endswith(".pyc")]
    except OSError:
        return
    for name in names:
        try:
            os.unlink(os.path.join(cache, name))
        except OSError:
            pass


def _first_page(raw: bytes, size: int, limit: int) -> tuple[str, bool]:
    lines = byte_lines(raw)
    raw_len = len(raw)
    if size > raw_len and len(lines) > 1 and not raw.endswith(b"\n"):
        raw_len -= len(lines.pop())  # a line cut by the read is shown whole or not at all
    return numbered_page(lines, 1, limit, raw_len, size - raw_len)


def _replace(old: str, arguments: dict, rel: str) -> tuple[str, tuple[int, int, int]]:
    """The new text and where it changed (start, end in the old text, end in the new)."""
    needle, replacement = arguments["old_str"], arguments.get("new_str", "")
    first = old.find(needle)
    if first < 0:
        raise ToolError(f"Error: old_str not found in {rel}")
    if old.find(needle, first + 1) >= 0:
        count = _count_overlapping(old, needle)
        raise ToolError(f"Error: old_str found {count} times in {rel} (must be unique)")
    new = old[:first] + replacement + old[first + len(needle) :]
    return new, (first, first + len(needle), first + len(replacement))


def _count_overlapping(text: str, needle: str) -> int:
    count, at = 0, text.find(needle)
    while at >= 0:
        count, at = count + 1, text.find(needle, at + 1)
    return count


def _insert(old: str, arguments: dict, rel: str) -> tuple[str, tuple[int, int, int]]:
    lines = split_lines(old)
    at = arguments["insert_line"]
    if at > len(lines):
        raise ToolError(f"Error: insert_line {at} is out of range for {rel} (0-{len(lines)})")
    added = arguments["new_str"]
    if added and not added.endswith("\n"):
        added += "\n"
    before = "".join(lines[:at])
    if before and not before.endswith("\n"):  # inserting after a last line that has no newline
        added = "\n" + added
    new = before + added + "".join(lines[at:])
    return new, (len(before), len(before), len(before) + len(added))

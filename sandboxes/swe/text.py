"""Text helpers of the SWE tools: lines as `cat -n`, git and pytest count them (split at "\\n"
only, unlike str.splitlines, which also splits at form feeds and other separators), line
numbering, bounded text, and unified diffs.

These run on every read and edit step, so the per-line work stays in C (map/join, list slices).
"""

from __future__ import annotations

import difflib
import re

NO_NEWLINE = "\\ No newline at end of file\n"
CONTEXT = 3
# Item n is line n's `cat -n` prefix after the previous line's newline; item 0 is the format.
_BYTE_PREFIXES: list[bytes] = [b"\n%6d\t"]
_CACHED_LINES = 1 << 16
_HUNK = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


def split_lines(text: str) -> list[str]:
    """`text` as lines that keep their "\\n" (the last one may have none)."""
    lines = text.split("\n")
    last = lines.pop()
    lines = [line + "\n" for line in lines]
    if last:
        lines.append(last)
    return lines


def truncation_marker(dropped: int, total: int, hint: str = "") -> str:
    """What stands where output was cut: `[... N of M bytes truncated ...]`, and how to see more."""
    return f"[... {dropped} of {total} bytes truncated{f'; {hint}' if hint else ''} ...]"


def cut_middle(head: bytes, tail: bytes, total: int) -> str:
    """The kept head and tail of `total` bytes, a marker line between them where bytes were dropped."""
    dropped = total - len(head) - len(tail)
    if not dropped:
        return (head + tail).decode("utf-8", "replace")
    marker = f"\n{truncation_marker(dropped, total)}\n"
    return head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace")


def bound(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to about `limit` UTF-8 bytes: head and tail around a `[... N of M bytes truncated ...]`
    marker line."""
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) <= limit:
        return text, False
    half = limit // 2
    return cut_middle(raw[:half], raw[len(raw) - half :], len(raw)), True


def _prefixes(cache: list, first: int, last: int) -> list:
    """Line prefixes first..last-1 (each a newline, the number, a tab), the first one without its
    newline; from `cache` (grown as needed) while the numbers are small, so the cache stays bounded."""
    if last > _CACHED_LINES:
        found = [cache[0] % n for n in range(first, last)]
    else:
        if len(cache) < last:
            cache.extend(
                cache[0] % n for n in range(len(cache), min(_CACHED_LINES, max(last, 2 * len(cache))))
            )
        found = cache[first:last]
    found[0] = found[0][1:]
    return found


def _interleaved(prefixes: list, lines: list, empty: str | bytes) -> str | bytes:
    # Slice assignment and one join: no per-line concatenation, so the work stays in C.
    out = [empty] * (2 * len(lines))
    out[0::2] = prefixes
    out[1::2] = lines
    return empty.join(out)


def _numbered_bytes(lines: list[bytes], first: int) -> bytes:
    if not lines:
        return b""
    prefixes = _prefixes(_BYTE_PREFIXES, first, first + len(lines))
    return _interleaved(prefixes, lines, b"") + b"\n"  # type: ignore[operator]


def byte_lines(raw: bytes) -> list[bytes]:
    """`raw` split at newlines; the bytes after the last newline are a line only if there are some."""
    lines = raw.split(b"\n")
    if not lines[-1]:
        lines.pop()
    return lines


def numbered_page(lines: list[bytes], first: int, limit: int, raw_len: int, rest: int) -> tuple[str, bool]:
    """`lines` numbered from `first` as `cat -n` shows them: as many whole lines as fit in `limit`
    bytes. `raw_len` is the size of the bytes the lines came from, `rest` how many bytes follow them
    unread. When anything is left out, a last line says how much and where to read on, so a large
    file costs one page, not a pass over all of it. Bytes that are not UTF-8 show as U+FFFD."""
    fit = limit // 8 + 1  # a numbered line takes at least 8 bytes: no more than these can show
    if len(lines) > fit:
        lines = lines[:fit]
        kept = sum(map(len, lines)) + fit  # each kept line has its newline: more lines follow
        raw_len, rest = kept, raw_len + rest - kept
    out = _numbered_bytes(lines, first)
    if len(out) <= limit and not rest:
        return out.decode("utf-8", "replace"), False
    cut = out.rfind(b"\n", 0, limit) + 1  # the end of the last whole line that fits
    shown = out.count(b"\n", 0, cut)
    if shown:
        text = out[:cut].decode("utf-8", "replace")
        left = raw_len - sum(map(len, lines[:shown])) - shown + rest
        hint = f"continue with start_line={first + shown}"
    else:  # one line longer than the limit: part of it
        text = out[:limit].decode("utf-8", "replace") + "\n"
        left = raw_len - (limit - len(b"%6d\t" % first)) + rest
        hint = f"line {first} alone is longer: look at parts of it with bash (cut -c, head -c)"
    return f"{text}{truncation_marker(left, raw_len + rest, hint)}\n", True


def change_span(old: str, new: str) -> tuple[int, int, int]:
    """(start, old_end, new_end): old[start:old_end] became new[start:new_end], the text around
    it unchanged. For callers that do not know where they changed the text."""
    lo, hi = 0, min(len(old), len(new))
    while lo < hi:  # binary search over C-speed prefix comparisons
        mid = (lo + hi + 1) // 2
        if old.startswith(new[:mid]):
            lo = mid
        else:
            hi = mid - 1
    room = min(len(old), len(new)) - lo
    lo_s, hi_s = 0, room
    while lo_s < hi_s:
        mid = (lo_s + hi_s + 1) // 2
        if old.endswith(new[len(new) - mid :]):
            lo_s = mid
        else:
            hi_s = mid - 1
    return lo, len(old) - lo_s, len(new) - lo_s


def _context_start(text: str, pos: int) -> int:
    """Where the line CONTEXT lines above the one holding `pos` starts."""
    start = text.rfind("\n", 0, pos) + 1
    for _ in range(CONTEXT):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def _context_length(text: str, pos: int) -> int:
    """How far from `pos` the line holding it and CONTEXT more lines end."""
    end = pos
    for _ in range(CONTEXT + 1):
        found = text.find("\n", end)
        if found < 0:
            return len(text) - pos
        end = found + 1
    return end - pos


def unified_diff(
    old: str, new: str, rel: str, created: bool = False, span: tuple[int, int, int] | None = None
) -> str:
    """`git diff`-style unified diff (3 lines of context), with git's marker for a last line that
    has no newline. `span` is where the text changed (see change_span); only that region and its
    context go through difflib, the hunk headers shifted back to file line numbers."""
    start, old_end, new_end = span or change_span(old, new)
    begin = _context_start(old, start)
    after = _context_length(old, old_end)  # the text after the change is the same in both
    skipped = old.count("\n", 0, begin)
    produced = difflib.unified_diff(
        split_lines(old[begin : old_end + after]),
        split_lines(new[begin : new_end + after]),
        fromfile="/dev/null" if created else f"a/{rel}",
        tofile=f"b/{rel}",
    )
    out = []
    for line in produced:
        if skipped and line.startswith("@@"):
            found = _HUNK.match(line)
            assert found is not None
            old_at, old_len, new_at, new_len = found.groups()
            line = f"@@ -{int(old_at) + skipped}{old_len} +{int(new_at) + skipped}{new_len} @@\n"
        out.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
    return "".join(out)

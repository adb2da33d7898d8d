"""Pure redaction: how the secrets that `beam_pipelines.secret_rules` finds become placeholders.

Nothing here imports Beam. A trajectory is redacted in two passes through one `Redactor`: `scan`
every text of it (every value found anywhere is recorded), then `redact` every text (each recorded
value is replaced wherever it appears, not only where it was found: a password caught on an
`export` line is also replaced when `echo` prints it alone). Values too short or too plain to be
recognised out of context ("postgres", "letmein") are replaced only on the line they were found on;
see `secret_rules.replace_everywhere`.

Rendered screens wrap long lines at the pane width, so screen texts are examined as logical lines
(full-width rows joined to the row after them) and re-wrapped after replacement: a token split
across two rows is found and replaced whole.
"""

from __future__ import annotations

import re

from beam_pipelines.secret_rules import PRIVATE_KEY, SecretFinder, field_secret_kind, replace_everywhere


def _logical_lines(lines: list[str], width: int) -> list[tuple[int, int]]:
    """[start, end) row ranges of the logical lines of a screen `width` columns wide: a row of
    exactly `width` characters continues on the next row. Without a width, every row stands alone."""
    groups: list[tuple[int, int]] = []
    start = 0
    for i, line in enumerate(lines):
        if not (width and len(line) == width and i + 1 < len(lines)):
            groups.append((start, i + 1))
            start = i + 1
    return groups


def _wrap(line: str, width: int) -> list[str]:
    return [line[i : i + width] for i in range(0, len(line), width)] or [""]


def _standalone(line: str, start: int, end: int) -> bool:
    return not (start and line[start - 1].isalnum()) and not (end < len(line) and line[end].isalnum())


class Redactor:
    """Replaces secrets with placeholders `<REDACTED:kind:n>`, one per distinct value: the same
    value gets the same placeholder everywhere this redactor is used (one trajectory), numbered per
    kind in the order the values were first seen, so a redacted trajectory stays self-consistent.

    `scan` every text first, then `redact` every text; `redact` alone replaces what each line shows.
    """

    def __init__(self, finder: SecretFinder | None = None) -> None:
        self._finder = finder or SecretFinder()
        self._placeholders: dict[str, str] = {}
        self._kinds: dict[str, str] = {}
        self._per_kind: dict[str, int] = {}
        self._global: set[str] = set()
        self._global_re: re.Pattern[str] | None = None
        self._done: dict[str, tuple[str | None, tuple[tuple[str, int], ...]]] = {}
        self._chars: dict[str, int] = {}
        self.characters = 0

    @property
    def counts(self) -> dict[str, int]:
        """Distinct values redacted, by kind."""
        return dict(self._per_kind)

    @property
    def chars(self) -> dict[str, int]:
        """Characters replaced by `redact`, by kind (every occurrence counts)."""
        return dict(self._chars)

    def scan(self, text: str, width: int = 0, key: str = "") -> None:
        """Pass 1: record every secret in `text` (a screen `width` columns wide, if given; the value
        of the field `key` of a structured map, if given) and count its characters in `characters`."""
        self.characters += len(text)
        if not text:
            return
        kind = field_secret_kind(key, text)
        if kind is not None:
            self._placeholder(kind, text)
            if replace_everywhere(text):
                self._global.add(text)
                self._global_re = None
            return
        if "-----" in text:
            for match in PRIVATE_KEY.finditer(text):
                self._private_key(match.group())
            text = PRIVATE_KEY.sub("", text)
        lines = text.split("\n")
        if width and max(map(len, lines)) >= width:
            lines = ["".join(lines[start:end]) for start, end in _logical_lines(lines, width)]
        for line in lines:
            for finding in self._finder(line):
                self._placeholder(finding.kind, finding.value)
                if finding.everywhere and finding.value not in self._global:
                    self._global.add(finding.value)
                    self._global_re = None

    def redact(self, text: str, width: int = 0, key: str = "") -> str:
        """Pass 2: `text` with secrets replaced; the very same object when it holds none."""
        if not text:
            return text
        kind = field_secret_kind(key, text)
        if kind is not None:
            placeholder = self._placeholder(kind, text)
            kind = self._kinds[text]
            self._chars[kind] = self._chars.get(kind, 0) + len(text)
            return placeholder
        original = text
        if "-----" in text:
            text = PRIVATE_KEY.sub(self._replace_private_key, text)
        lines = text.split("\n")
        out: list[str] = []
        changed = False
        for start, end in _logical_lines(lines, width):
            line = lines[start] if end - start == 1 else "".join(lines[start:end])
            done = self._done.get(line)
            if done is None:
                done = self._done[line] = self._redact_line(line)
            redacted, chars = done
            if redacted is None:
                out.extend(lines[start:end])
                continue
            changed = True
            for kind, n in chars:
                self._chars[kind] = self._chars.get(kind, 0) + n
            out.extend(_wrap(redacted, width) if width and len(redacted) > width else [redacted])
        if changed:
            return "\n".join(out)
        return original if text == original else text

    def _private_key(self, block: str) -> str:
        """The block's placeholder; its body rows map to it too, so a screen that shows only part
        of the key (scrolled, without its BEGIN/END lines) is covered."""
        placeholder = self._placeholder("private_key", block)
        for row in block.split("\n"):
            row = row.strip()
            if len(row) >= 16 and not row.startswith("-----") and row not in self._placeholders:
                self._placeholders[row], self._kinds[row] = placeholder, "private_key"
                self._global.add(row)
                self._global_re = None
        return placeholder

    def _replace_private_key(self, match: re.Match[str]) -> str:
        block = match.group()
        self._chars["private_key"] = self._chars.get("private_key", 0) + len(block)
        return self._private_key(block)

    def _pattern(self) -> re.Pattern[str] | None:
        if self._global_re is None and self._global:
            # Longest first, so that a value containing another wins. Short values must stand alone.
            values = sorted(self._global, key=lambda v: (-len(v), v))
            short = "|".join(re.escape(v) for v in values if len(v) < 12)
            long = "|".join(re.escape(v) for v in values if len(v) >= 12)
            parts = [long] if long else []
            if short:
                parts.append(rf"(?<![A-Za-z0-9])(?:{short})(?![A-Za-z0-9])")
            self._global_re = re.compile("|".join(parts))
        return self._global_re

    def _redact_line(self, line: str) -> tuple[str | None, tuple[tuple[str, int], ...]]:
        spans: list[tuple[int, int, str]] = []
        for finding in self._finder(line):
            self._placeholder(finding.kind, finding.value)
            start = line.find(finding.value)
            while start >= 0:
                end = start + len(finding.value)
                if not finding.alone or _standalone(line, start, end):
                    spans.append((start, end, finding.value))
                start = line.find(finding.value, end)
        pattern = self._pattern()
        if pattern is not None:
            spans.extend((m.start(), m.end(), m.group()) for m in pattern.finditer(line))
        if not spans:
            return None, ()
        # Earliest first, the longest of those starting together; overlapped spans are dropped.
        spans.sort(key=lambda s: (s[0], -s[1]))
        parts: list[str] = []
        chars: dict[str, int] = {}
        pos = 0
        for start, end, value in spans:
            if start < pos:
                continue
            kind = self._kinds[value]
            parts += [line[pos:start], self._placeholders[value]]
            chars[kind] = chars.get(kind, 0) + end - start
            pos = end
        parts.append(line[pos:])
        return "".join(parts), tuple(sorted(chars.items()))

    def _placeholder(self, kind: str, value: str) -> str:
        found = self._placeholders.get(value)
        if found is None:
            n = self._per_kind.get(kind, 0) + 1
            self._per_kind[kind] = n
            self._kinds[value] = kind
            found = self._placeholders[value] = f"<REDACTED:{kind}:{n}>"
        return found

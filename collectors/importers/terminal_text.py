"""Terminal output and text fields of untrusted recordings, made safe to replay and to store.

pyte (the emulator the asciinema importer replays output through) knows CSI and OSC sequences only: it
draws the payload of a DCS, SOS, PM or APC string as screen text, and a C0/C1 control it has no use for
ends the text it is drawing (the rest of that output chunk is lost). `ControlStrings` sits in front of
it and consumes those strings (and OSC too, whatever its code) as xterm and tmux do: DCS, SOS and PM
end at ST (ESC \\ or U+009C), OSC and APC also at BEL; CAN or SUB abort one, and an ESC not followed by
`\\` ends it and starts a new sequence. Controls pyte does not handle are dropped; those it does (BEL,
BS, HT, LF, VT, FF, CR, SO, SI, ESC and the 8-bit CSI) pass. State carries across chunks: a string or an
ESC split between two output events is still recognised.

`plain_text` is for fields a recording's header gives (title, command, tags, marker labels, TERM):
escape sequences and strings are dropped, tabs and line breaks become spaces, other C0/C1 controls go.
"""

from __future__ import annotations

import re
from typing import Any

# What a replayed recording may ask of the emulator: its work and memory grow with the screen's area
# (one erase touches every cell) and the turns kept with the actions. Real terminals stay far below.
MAX_COLUMNS = 1000
MAX_LINES = 500
MAX_STEPS = 10_000

# After ESC, or as the 8-bit C1 character: the strings whose payload is never text. The value is the
# pattern that ends the string.
_END_AT_ST = re.compile(r"[\x1b\x9c\x18\x1a]")
_END_AT_ST_OR_BEL = re.compile(r"[\x1b\x9c\x18\x1a\x07]")
_STRINGS = {
    "\x1bP": _END_AT_ST,  # DCS
    "\x1bX": _END_AT_ST,  # SOS
    "\x1b^": _END_AT_ST,  # PM
    "\x1b_": _END_AT_ST_OR_BEL,  # APC
    "\x1b]": _END_AT_ST_OR_BEL,  # OSC
    "\x90": _END_AT_ST,
    "\x98": _END_AT_ST,
    "\x9e": _END_AT_ST,
    "\x9f": _END_AT_ST_OR_BEL,
    "\x9d": _END_AT_ST_OR_BEL,
}
# Outside a string: a string's start, an ESC ending the chunk (the next chunk may make it one), or a
# control pyte would draw (NUL and DEL it ignores; C1 but CSI and the introducers above).
_GROUND = re.compile(
    r"\x1b[P\]X^_]|\x1b\Z|[\x90\x98\x9d\x9e\x9f]"
    r"|[\x00-\x06\x10-\x1a\x1c-\x1f\x7f\x80-\x8f\x91-\x97\x99\x9a\x9c]"
)
_SEQUENCE = re.compile(
    r"(?:\x1b[P\]X^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x18\x1a\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # strings
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b[ -/]*[0-~]?"  # other escape sequences
)
_LINE_BREAKS = re.compile(r"[\t\n\v\f\r\x85\u2028\u2029]")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ControlStrings:
    """A filter for a terminal output stream: see the module doc. Feed it the chunks in order."""

    def __init__(self) -> None:
        self._end: re.Pattern[str] | None = None  # inside a string: what ends it
        self._held = ""  # an ESC that ended the previous chunk

    def feed(self, data: str) -> str:
        data, self._held = self._held + data, ""
        kept: list[str] = []
        position, size = 0, len(data)
        while position < size:
            if self._end is None:
                found = _GROUND.search(data, position)
                if found is None:
                    kept.append(data[position:])
                    break
                kept.append(data[position : found.start()])
                token = found.group()
                if token == "\x1b":  # the chunk's last character
                    self._held = token
                    break
                self._end = _STRINGS.get(token)  # None: a control dropped
                position = found.end()
                continue
            found = self._end.search(data, position)
            if found is None:
                break  # the payload so far: consumed
            if found.group() == "\x1b":
                if found.end() == size:
                    self._held = "\x1b"  # ST or a new sequence: the next chunk says
                    break
                # ESC \ is ST; any other ESC ends the string and starts a sequence of its own.
                position = found.end() + 1 if data[found.end()] == "\\" else found.start()
            else:
                position = found.end()
            self._end = None
        return "".join(kept)


def plain_text(text: str) -> str:
    """A header field as plain text: escape sequences dropped, line breaks spaces, no controls."""
    return _CONTROLS.sub("", _LINE_BREAKS.sub(" ", _SEQUENCE.sub("", text)))


def plain_values(value: Any) -> Any:
    """`plain_text` on every string (keys too) of a JSON value."""
    if isinstance(value, str):
        return plain_text(value)
    if isinstance(value, list):
        return [plain_values(v) for v in value]
    if isinstance(value, dict):
        return {plain_text(str(k)): plain_values(v) for k, v in value.items()}
    return value

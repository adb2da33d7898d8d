"""What a recorded terminal's input stream holds: the keys a person pressed, and reports the terminal
wrote there itself.

Keys: the bytes xterm-compatible terminals send (xterm's ctlseqs, "PC-Style Function Keys" and
"Cursor Keys"), named as tmux names keys in our keystrokes actions ("\\r" -> Enter, "\\x03" -> C-c,
"\\x1b[1;5C" -> C-Right, "\\x1b[15;2~" -> S-F5).

Reports: a program that asks the terminal something (cursor position `CSI 6n`, device attributes
`CSI c` / `CSI > c`, a mode `CSI ? Ps $ p`, a colour `OSC 11 ; ?`, a setting `DCS $ q`, its version
`CSI > q`) gets the answer on its input, so `asciinema rec --stdin` records the answer as input
although nobody typed it. The answers' shapes are those of xterm's ctlseqs ("Device-Status Reports",
"Send Device Attributes", "Request Mode", "Window manipulation", "Operating System Commands", "Device
Control functions") and kitty's keyboard protocol (`CSI ? flags u`); focus reports (`CSI I`, `CSI O`,
mode 1004) are the terminal's too. They are output of the terminal, not the agent's input, so
`TerminalReports.strip` takes them out. One shape is also a key: a cursor-position report on row 1,
column 2-8 (`CSI 1 ; 5 R`) is what xterm sends for a modified F3 (C-F3); it is a report while a
`CSI 6n` the output asked has not been answered, and the key otherwise. Mouse reports are not taken
out (they are the person's input, with no keystroke to stand for them).
"""

from __future__ import annotations

import re

_CURSOR_KEYS = {"A": "Up", "B": "Down", "C": "Right", "D": "Left", "H": "Home", "F": "End"}
_FUNCTION_KEYS = {"P": "F1", "Q": "F2", "R": "F3", "S": "F4"}
_TILDE_KEYS = {
    1: "Home",
    2: "Insert",
    3: "Delete",
    4: "End",
    5: "PageUp",
    6: "PageDown",
    **dict(zip((15, 17, 18, 19, 20, 21, 23, 24), (f"F{i}" for i in range(5, 13)), strict=True)),
}
_KEY_SEQUENCES = {
    "\r": "Enter",
    "\n": "Enter",
    "\t": "Tab",
    "\x7f": "BSpace",
    "\x08": "BSpace",
    "\x00": "C-Space",
    "\x1b[Z": "BTab",
    **{f"\x1b[{n}~": name for n, name in _TILDE_KEYS.items()},
    # Normal and application cursor-key forms.
    **{f"\x1b{p}{c}": name for p in "[O" for c, name in _CURSOR_KEYS.items()},
    **{f"\x1bO{c}": name for c, name in _FUNCTION_KEYS.items()},
}
# xterm's modified keys: CSI 1 ; m X for cursor keys and F1-F4, CSI n ; m ~ for the others.
_MODIFIED = re.compile(r"\x1b\[1;([2-8])([ABCDHFPQRS])|\x1b\[([0-9]{1,2});([2-8])~")
_MODIFIERS = {2: "S-", 3: "M-", 4: "M-S-", 5: "C-", 6: "C-S-", 7: "C-M-", 8: "C-M-S-"}
_LONGEST_SEQUENCE = max(map(len, _KEY_SEQUENCES))
_PASTE = re.compile(r"\x1b\[20[01]~")  # bracketed-paste brackets: the pasted text is typed as such

# Keys that edit the line being typed: they join the keys around them into one action. Any other key
# (Enter, Tab, Up, Escape, C-c, ...) asks the program for something whose answer has to be seen, so
# it ends the action.
LINE_EDIT_KEYS = frozenset(
    {"BSpace", "Delete", "Left", "Right", "Home", "End", "C-Left", "C-Right"}
    | {"C-a", "C-b", "C-e", "C-f", "C-k", "C-u", "C-w", "C-y", "M-b", "M-f", "M-d"}
)

_REPORT = re.compile(
    r"\x1b\[[0-9]+;[0-9]+R"  # cursor position (CPR)
    r"|\x1b\[\?[0-9;]*[cRnu]"  # DA1, DECXCPR, DEC-specific status, kitty keyboard flags
    r"|\x1b\[>[0-9;]*c"  # DA2
    r"|\x1b\[\??[0-9;]+\$y"  # DECRPM (a mode's state)
    r"|\x1b\[[03]n"  # operating status
    r"|\x1b\[[0-9]+(?:;[0-9]+)*t"  # window state, position and size
    r"|\x1b\[[IO]"  # focus in / out
    r"|\x1b\](?:[0-9]+;|[Ll])[^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC answers: colours, title, clipboard
    r"|\x1bP(?:[01]?\$r|[01]\+r|>\||!\|)[^\x1b]*\x1b\\"  # DECRQSS, XTGETTCAP, XTVERSION, DA3
)
_CPR_AS_KEY = re.compile(r"\x1b\[1;[2-8]R")
_CPR_QUERY = re.compile(r"\x1b\[\??6n")


class TerminalReports:
    """Takes the terminal's reports out of a recording's input; feed it the output too, in order, so a
    cursor-position query is known when its answer could also be a key."""

    def __init__(self) -> None:
        self.unanswered_position_queries = 0
        self.dropped = 0

    def note_output(self, data: str) -> None:
        self.unanswered_position_queries += len(_CPR_QUERY.findall(data))

    def strip(self, data: str) -> str:
        """`data` without the reports in it: the keys that were pressed (possibly none)."""
        return _REPORT.sub(self._drop, data) if "\x1b" in data else data

    def _drop(self, found: re.Match[str]) -> str:
        report = found.group()
        if report.endswith("R") and not report.startswith("\x1b[?"):
            if self.unanswered_position_queries:
                self.unanswered_position_queries -= 1
            elif _CPR_AS_KEY.fullmatch(report):
                return report  # nobody asked: xterm's modified F3
        self.dropped += 1
        return ""


def key_items(data: str) -> list[tuple[str, bool]]:
    """Typed input as (text, is a key) pairs: runs of literal text, and tmux key names for special keys."""
    data = _PASTE.sub("", data)
    items: list[tuple[str, bool]] = []
    i = 0
    while i < len(data):
        name, size = _key_at(data, i)
        if name is not None:
            items.append((name, True))
        elif items and not items[-1][1]:
            items[-1] = (items[-1][0] + data[i : i + size], False)
        else:
            items.append((data[i : i + size], False))
        i += size
    return items


def ends_action(items: list[tuple[str, bool]]) -> bool:
    """True if one of the keys asks the program for something (see LINE_EDIT_KEYS)."""
    return any(is_key and text not in LINE_EDIT_KEYS for text, is_key in items)


def _key_at(data: str, i: int) -> tuple[str | None, int]:
    """(key name or None for literal text, characters consumed) at data[i]."""
    char = data[i]
    if char == "\x1b":
        modified = _MODIFIED.match(data, i)
        if modified and (modified[2] or int(modified[3]) in _TILDE_KEYS):
            if modified[2]:
                modifier, base = modified[1], {**_CURSOR_KEYS, **_FUNCTION_KEYS}[modified[2]]
            else:
                modifier, base = modified[4], _TILDE_KEYS[int(modified[3])]
            return _MODIFIERS[int(modifier)] + base, modified.end() - i
        for size in range(_LONGEST_SEQUENCE, 1, -1):
            if data[i : i + size] in _KEY_SEQUENCES:
                return _KEY_SEQUENCES[data[i : i + size]], size
        following = data[i + 1 : i + 2]
        if following and "!" <= following <= "~" and following not in "[O":
            return f"M-{following}", 2  # Alt sends ESC before the key
        return "Escape", 1
    if char in _KEY_SEQUENCES:
        return _KEY_SEQUENCES[char], 1
    code = ord(char)
    if code < 0x1B:
        return f"C-{chr(code + 0x60)}", 1
    if code < 0x20:
        return f"C-{chr(code + 0x40)}", 1  # C-\ C-] C-^ C-_
    return None, 1

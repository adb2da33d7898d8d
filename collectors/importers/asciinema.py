"""asciinema recordings (`.cast`) into terminal trajectories, replayed through a terminal emulator.

Format: asciicast v2, https://docs.asciinema.org/manual/asciicast/v2/ (asciinema CLI 2.x): the first
line is a JSON header `{"version": 2, "width", "height", "timestamp", "duration", "idle_time_limit",
"command", "title", "env": {"SHELL", "TERM"}, "theme"}`, every following line an event
`[time, code, data]`, time in seconds since the start, code "o" (output), "i" (input, recorded with
`asciinema rec --stdin`), "m" (marker, data its label) or "r" (resize, data "COLSxROWS").
asciicast v3 (https://docs.asciinema.org/manual/asciicast/v3/, asciinema CLI 3.x) is read too: its
header gives the size as `"term": {"cols", "rows", "type"}`, an event's time is the interval since the
previous event, "x" is the exit status and lines starting with `#` are comments.

One file is one trajectory. The output stream is replayed through pyte into screens, rendered as our
terminal sandbox renders tmux's (`capture-pane`: trailing spaces and trailing blank rows dropped, a
wrapped line shown as two rows; output that scrolled off during a step counted on a first line, the
step's plain output attached as output.txt).

Steps: the typed input ("i" events) becomes `keystrokes` actions in tmux key names ("\\r" -> Enter,
"\\x03" -> C-c, arrow sequences -> Up, ...). Consecutive input events form one action until one of
them presses Enter or the program answers with output that is not just the echo of what was typed, so
a command typed key by key is one action while each key sent to a full-screen program (less, vim) is
its own. An item's duration is the recorded time until the next input (the last one of a file: until
its last event), capped at the sandbox's maximum. The observation is the screen once the output that
followed the action has been drawn, just before the next input. The initial observation is the screen
before the first input.

Not mapped: a recording without input events (plain `asciinema rec`, no --stdin) has no actions, and
commands cannot be told reliably from prompt lines, so it is a bad row saying so. Exit statuses and
working directories are not known per step (data holds what the stream gives: output size, truncation).
Colours and themes are dropped, as in the sandbox's text screens.

Limits (a recording past one is a dead letter saying which): a terminal of at most `MAX_COLUMNS` x
`MAX_LINES` (1000 x 500), in the header and in every resize event, since the emulator's work and
memory grow with the screen's area; at most `MAX_STEPS` (10,000) actions; the file size and JSON
nesting of `collectors.importers.reading` (128 MiB, 256 levels). Output is replayed through
`terminal_text.ControlStrings`, so DCS/SOS/PM/APC/OSC payloads and stray control characters never
show on a screen, and header fields (title, command, tags, TERM, SHELL, marker labels) are stored as
plain text, without escape sequences or control characters.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyte

from collectors.importers import reading
from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn
from collectors.importers.terminal_text import (
    MAX_COLUMNS,
    MAX_LINES,
    MAX_STEPS,
    ControlStrings,
    plain_text,
    plain_values,
)
from sandboxes.base import InvalidActionError
from sandboxes.terminal.actions import MAX_DURATION, is_key_name, keystrokes_action
from sandboxes.terminal.config import TerminalConfig
from sandboxes.terminal.sandbox import scrolled_off
from sandboxes.terminal.shell import StepOutput
from schemas.records import Action, Attachment, Environment, Observation, Policy, Task

_DEFAULTS = TerminalConfig()
_RESIZE = re.compile(r"([0-9]+)x([0-9]+)")
# Input bytes a terminal sends for a key -> the tmux key name our actions use (xterm sequences, both the
# normal and the application cursor-key forms).
_CURSOR_KEYS = {"A": "Up", "B": "Down", "C": "Right", "D": "Left", "H": "Home", "F": "End"}
_KEY_SEQUENCES = {
    "\r": "Enter",
    "\n": "Enter",
    "\t": "Tab",
    "\x7f": "BSpace",
    "\x08": "BSpace",
    "\x00": "C-Space",
    "\x1b[Z": "BTab",
    "\x1b[2~": "Insert",
    "\x1b[3~": "Delete",
    "\x1b[5~": "PageUp",
    "\x1b[6~": "PageDown",
    "\x1b[1~": "Home",
    "\x1b[4~": "End",
    **{f"\x1b{p}{c}": name for p in "[O" for c, name in _CURSOR_KEYS.items()},
    **{f"\x1bO{c}": f"F{i}" for i, c in enumerate("PQRS", 1)},
    **{f"\x1b[{n}~": f"F{i}" for i, n in zip(range(5, 13), (15, 17, 18, 19, 20, 21, 23, 24), strict=True)},
}
_MODIFIED = re.compile(r"\x1b\[1;([2-8])([ABCDHF])")  # xterm's modified cursor keys, e.g. C-Up
_MODIFIERS = {2: "S-", 3: "M-", 4: "M-S-", 5: "C-", 6: "C-S-", 7: "C-M-", 8: "C-M-S-"}
_LONGEST_SEQUENCE = max(map(len, _KEY_SEQUENCES))
_PASTE = re.compile(r"\x1b\[20[01]~")  # bracketed-paste brackets: the pasted text is typed as such
# Keys whose answer from a line editor is a short redraw of the line, not a new screen.
_LINE_EDIT_KEYS = {"BSpace", "Left", "Right", "Home", "End", "Delete", "C-a", "C-e", "C-h", "C-w", "C-u"}
_ALTERNATE_SCREEN = {47, 1047, 1049}


class BadCast(BadRow):
    """A recording that is not a readable asciicast; the message names the line."""


@dataclass
class Cast:
    header: dict[str, Any]
    width: int
    height: int
    events: list[tuple[float, str, str]]  # (seconds since the start, code, data)


def parse_cast(text: str) -> Cast:
    """The header and events of an asciicast v2/v3 file; BadCast naming the line that is wrong."""
    # Not splitlines(): it also breaks at U+0085, U+2028 and \x1c-\x1e, which JSON strings hold raw.
    lines = text.split("\n")
    if not lines or not lines[0].strip():
        raise BadCast("line 1: empty file, expected an asciicast header (a JSON object)")
    header = reading.parse_json(lines[0], "line 1: the header", BadCast)
    if not isinstance(header, dict):
        raise BadCast(f"line 1: the header should be a JSON object, got {type(header).__name__}")
    version = header.get("version")
    if version not in (2, 3):
        raise BadCast(
            f"line 1: asciicast version {version!r} is not supported (2 or 3); an asciicast v1 file is"
            " one JSON document: convert it with asciinema 3's `asciinema convert`"
        )
    size = header.get("term") if version == 3 else header
    keys = ("cols", "rows") if version == 3 else ("width", "height")
    if not isinstance(size, dict) or not all(_positive_int(size.get(k)) for k in keys):
        where = "term.cols/term.rows" if version == 3 else "width/height"
        raise BadCast(f"line 1: the header needs a positive integer terminal size ({where})")
    _check_size(1, size[keys[0]], size[keys[1]])
    events: list[tuple[float, str, str]] = []
    now = 0.0
    for number, line in enumerate(lines[1:], 2):
        if not line.strip() or (version == 3 and line.startswith("#")):
            continue
        event = reading.parse_json(line, f"line {number}: the event", BadCast)
        if not (
            isinstance(event, list)
            and len(event) == 3
            and _number(event[0])
            and isinstance(event[1], str)
            and isinstance(event[2], str)
        ):
            raise BadCast(f"line {number}: an event should be [time, code, data], got {line[:200]!r}")
        time = now + event[0] if version == 3 else float(event[0])
        if event[0] < 0 or time < now:
            raise BadCast(f"line {number}: time {event[0]} goes back (previous event at {now:g} s)")
        if event[1] == "r":
            resize = _RESIZE.fullmatch(event[2])
            if not resize:
                raise BadCast(f"line {number}: a resize event needs data COLSxROWS, got {event[2][:200]!r}")
            _check_size(number, resize[1], resize[2])
        now = time
        events.append((time, event[1], event[2]))
    return Cast(header=header, width=size[keys[0]], height=size[keys[1]], events=events)


def _check_size(number: int, columns: int | str, lines: int | str) -> None:
    """BadCast for a terminal over the size limit; digits are compared as text first, since int() of
    thousands of digits is refused (and slow)."""
    if any(len(str(n)) > 9 for n in (columns, lines)) or int(columns) > MAX_COLUMNS or int(lines) > MAX_LINES:
        raise BadCast(
            f"line {number}: a terminal of {str(columns)[:20]}x{str(lines)[:20]} is over the"
            f" {MAX_COLUMNS}x{MAX_LINES} limit"
        )


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


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


def _key_at(data: str, i: int) -> tuple[str | None, int]:
    """(key name or None for literal text, characters consumed) at data[i]."""
    char = data[i]
    if char == "\x1b":
        modified = _MODIFIED.match(data, i)
        if modified:
            return _MODIFIERS[int(modified[1])] + _CURSOR_KEYS[modified[2]], modified.end() - i
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


class ReplayScreen(pyte.Screen):
    """pyte's screen, plus what tmux does that the sandbox's observations show: rows scrolled into the
    history (full-screen scrolls outside the alternate screen) are counted, and the alternate screen
    (full-screen programs) gives the main screen back when the program leaves it."""

    def __init__(self, columns: int, lines: int) -> None:
        super().__init__(columns, lines)
        self.scrolled = 0
        self._saved: tuple[dict[int, dict[int, Any]], Any] | None = None

    def index(self) -> None:
        top, bottom = self.margins or (0, self.lines - 1)
        if self.cursor.y == bottom and (top, bottom) == (0, self.lines - 1) and self._saved is None:
            self.scrolled += 1
        super().index()

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and _ALTERNATE_SCREEN & set(modes) and self._saved is None:
            self._saved = ({y: dict(row) for y, row in self.buffer.items()}, self.cursor)
            self.cursor = pyte.screens.Cursor(self.cursor.x, self.cursor.y, self.cursor.attrs)
            self.erase_in_display(2)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private") and _ALTERNATE_SCREEN & set(modes) and self._saved is not None:
            rows, cursor = self._saved
            self._saved = None
            self.erase_in_display(2)
            for y, row in rows.items():
                if y < self.lines:
                    self.buffer[y].update({x: char for x, char in row.items() if x < self.columns})
            self.cursor = cursor
            self.ensure_hbounds()
            self.ensure_vbounds()
        super().reset_mode(*modes, **kwargs)

    def text(self) -> str:
        """The screen as the sandbox shows tmux's: rows without trailing blanks, no trailing empty rows.
        pyte's `display` would render every cell of every row (a second for an empty 1000x1000
        screen); a row's cells past its last written one are blank, so only written cells are read."""
        rows = [_row_text(self.buffer.get(y), self.columns) for y in range(self.lines)]
        while rows and not rows[-1]:
            rows.pop()
        return "\n".join(rows)


def _row_text(row: dict[int, Any] | None, columns: int) -> str:
    """One row as pyte's `display` renders it (a wide character's stub cell skipped), right-trimmed."""
    if not row:
        return ""
    chars: list[str] = []
    wide = False
    for x in range(min(max(row) + 1, columns)):
        if wide:
            wide = False
            continue
        char = row[x].data  # a missing cell is the row's default, a blank
        wide = bool(char) and pyte.screens.wcwidth(char[0]) == 2
        chars.append(char)
    return "".join(chars).rstrip()


@dataclass
class _Pending:
    """The action being read: its input events, and what output would still be only their echo."""

    start_row: int
    start_scrolled: int
    inputs: list[tuple[float, str]] = field(default_factory=list)
    output: StepOutput = field(default_factory=lambda: StepOutput(_DEFAULTS.max_output_bytes))
    open: bool = True  # more input joins this action
    echo: str = ""  # typed text not yet echoed
    editing: bool = False  # the last key edits a line: its short redraw is an echo too

    def add_input(self, time: float, data: str) -> None:
        self.inputs.append((time, data))
        items = key_items(data)
        if ("Enter", True) in items:
            self.open = False
        self.editing = bool(items) and items[-1][1] and items[-1][0] in _LINE_EDIT_KEYS
        self.echo += "".join(text for text, is_key in items if not is_key)

    def add_output(self, data: str) -> None:
        self.output.add(data.encode())
        if not self.open:
            return
        if data and self.echo.startswith(data):
            self.echo = self.echo[len(data) :]
        elif not (self.editing and "\n" not in data and len(data) < 64):
            self.open = False


def replay(cast: Cast) -> tuple[Observation, list[Turn], list[dict[str, Any]], str | None]:
    """(initial observation, turns, markers, exit status) of a parsed recording."""
    screen = ReplayScreen(cast.width, cast.height)
    stream = pyte.Stream(screen)
    output_filter = ControlStrings()  # DCS/APC/... payloads and stray controls never reach pyte
    initial: Observation | None = None
    pending: _Pending | None = None
    markers: list[dict[str, Any]] = []
    turns: list[Turn] = []
    exit_status: str | None = None
    for time, code, data in cast.events:
        if code == "i":
            if pending is None:
                initial = Observation(format="terminal_screen", text=screen.text())
            elif not pending.open:
                _check_steps(turns)
                turns.append(Turn(action=_action(pending, time), observation=_observation(screen, pending)))
                pending = None
            if pending is None:
                pending = _Pending(start_row=screen.cursor.y, start_scrolled=screen.scrolled)
            pending.add_input(time, data)
        elif code == "o":
            data = output_filter.feed(data)
            stream.feed(data)
            if pending is not None:
                pending.add_output(data)
        elif code == "r":
            columns, lines = map(int, data.split("x"))
            screen.resize(lines=lines, columns=columns)
        elif code == "m":
            markers.append({"time": time, "label": plain_text(data), "step": len(turns) if pending else None})
        elif code == "x":
            exit_status = plain_text(data)
        # Other codes (none in v2/v3 today) are ignored.
    if pending is None or initial is None:
        raise BadRow(
            "the recording has no input events, so no actions: record with `asciinema rec --stdin`"
            " (commands are not guessed from prompt lines)"
        )
    end = cast.events[-1][0]
    _check_steps(turns)
    turns.append(Turn(action=_action(pending, end), observation=_observation(screen, pending)))
    return initial, turns, markers, exit_status


def _check_steps(turns: list[Turn]) -> None:
    """Before a turn is added: each holds a screen, so their number bounds the memory a file takes."""
    if len(turns) >= MAX_STEPS:
        raise BadRow(f"the recording has over {MAX_STEPS:,} actions (the limit)")


def _action(pending: _Pending, next_input: float) -> Action:
    """The keystrokes of one action; each event's last key waits until the next input event."""
    items: list[tuple[str, bool, float]] = []  # (keys, is a key name, seconds)
    for index, (time, data) in enumerate(pending.inputs):
        following = pending.inputs[index + 1][0] if index + 1 < len(pending.inputs) else next_input
        keys = key_items(data)
        for position, (text, is_key) in enumerate(keys):
            wait = following - time if position == len(keys) - 1 else 0.0
            if items and not is_key and not items[-1][1]:
                items[-1] = (items[-1][0] + text, False, items[-1][2] + wait)
            else:
                items.append((text, is_key, wait))
    # Literal text that spells a key name ("Up") would be pressed as that key: type it in two parts.
    typed: list[tuple[str, float]] = []
    for text, is_key, wait in items:
        if not is_key and is_key_name(text):
            typed += [(text[:-1], 0.0), (text[-1], wait)]
        else:
            typed.append((text, wait))
    try:
        return keystrokes_action(
            [(k, round(min(max(d, 0.0), MAX_DURATION), 3)) for k, d in typed or [("", 0)]]
        )
    except InvalidActionError as exc:
        raise BadRow(
            f"input at {pending.inputs[0][0]:g} s does not make a keystrokes action: {exc}"
        ) from None


def _observation(screen: ReplayScreen, pending: _Pending) -> Observation:
    # As the sandbox counts it: the rows above the cursor when the step began scroll off first.
    hidden = screen.scrolled - pending.start_scrolled - pending.start_row
    text = screen.text()
    attachments: list[Attachment] = []
    if hidden > 0:
        text, output = scrolled_off(text, hidden, pending.output.content())
        attachments.append(output)
    data = {"output_bytes": pending.output.total, "output_truncated": hidden > 0}
    return Observation(
        format="terminal_screen",
        text=text[: _DEFAULTS.max_observation_chars],
        data=data,
        attachments=attachments,
    )


class AsciinemaImporter(Importer):
    name = "asciinema"
    dataset = "asciinema-recordings"  # no one public dataset: give --dataset and --license per collection
    license = ""
    summary = "asciinema .cast recordings (v2/v3, made with --stdin) replayed through pyte into screens"

    def read(self, source: str) -> Iterator[SourceRow]:
        for uri, content in reading.file_records(source, (".cast",)):
            name = reading.display_name(uri)
            if isinstance(content, reading.Unreadable):
                yield SourceRow(row_id=name, data=content, uri=uri)
            else:
                # The content's hash, not the path: moving a folder of recordings keeps their ids.
                row_id = f"{name}@{hashlib.sha256(content).hexdigest()[:16]}"
                yield SourceRow(row_id=row_id, data=content, uri=uri)

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        try:
            text = row.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRow(f"the file is not UTF-8 text (asciicast is JSON lines): {exc}") from None
        cast = parse_cast(text)
        initial, turns, markers, exit_status = replay(cast)
        header = cast.header
        env = header.get("env") if isinstance(header.get("env"), dict) else {}
        term = header.get("term") if isinstance(header.get("term"), dict) else {}
        # Header fields are the recording's own words: stored as plain text, no escape sequences.
        config = {
            "width": cast.width,
            "height": cast.height,
            "term": plain_values(term.get("type") or env.get("TERM")),
            "shell": plain_values(env.get("SHELL")),
            "recorder": f"asciinema (asciicast v{header['version']})",
        }
        metadata = {
            key: plain_values(header[key])
            for key in ("title", "command", "idle_time_limit", "duration", "tags")
            if header.get(key) not in (None, "", [])
        }
        if markers:
            metadata["markers"] = markers
        if exit_status is not None:
            metadata["exit_status"] = exit_status
        timestamp = header.get("timestamp")
        try:
            started = datetime.fromtimestamp(timestamp, UTC) if _number(timestamp) else None
        except (OverflowError, OSError, ValueError):
            raise BadCast(f"line 1: the timestamp {timestamp} is not a time") from None
        return Episode(
            domain="terminal",
            task=Task(id=row.row_id, metadata=metadata),
            initial=initial,
            turns=turns,
            environment=Environment(
                name="terminal",
                backend="imported",
                config={k: v for k, v in config.items() if v is not None},
            ),
            policy=Policy(name="imported", config={"recorder": "asciinema"}),
            started_at=started,
        )


IMPORTER = AsciinemaImporter()

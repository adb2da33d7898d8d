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
"\\x03" -> C-c, arrow sequences -> Up, ...; `terminal_input`). How input is grouped into actions:
- The terminal's own answers to a program's queries (cursor position `ESC[2;2R`, device attributes
  `ESC[>0;95;0c`, mode, colour and focus reports) are taken out of the input first: nobody typed them
  (`terminal_input.TerminalReports`; their number is kept as `terminal_reports_dropped`). An input
  event that held only answers is no input at all.
- Keys join one action until a key that asks the program for something: Enter, and every key that is
  not text or line editing (Tab, Up/Down, Escape, C-c, C-d, F-keys, ...; `terminal_input.ends_action`).
  Text and line-editing keys (BSpace, Left/Right, Home/End, C-a, C-e, C-w, C-u, ...) join the action.
- Output between two keys that changes more than the line being typed also ends the action: the next
  key starts a new one. The line being typed is the cursor's row at the key and after the output (a
  wrap or a full-screen program's command line moves it), so a shell's echo, its autosuggestion and
  syntax colouring redraws, and vim's `:` line keep a typed command one action, while a key sent to
  a full-screen program that redraws the screen (less's `q`, leaving its screen) is an action of its
  own.
An item's duration is the recorded time until the next key (the last one of a file: until its last
event), capped at the sandbox's maximum. A step's observation is the screen once the output the action
caused has settled, which is read as: just before the person's next key (they answer what they see),
or at the end of the recording for the last action. No quiet period cuts it shorter: output that came
slowly (a build, a program drawing its screen in chunks) was on the screen the person answered. The
initial observation is the screen before the first key. A resize event resizes the emulated screen
and keeps its content as tmux does (`terminal_screen`).

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
from collectors.importers.terminal_input import TerminalReports, ends_action, key_items
from collectors.importers.terminal_screen import ReplayScreen
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


@dataclass
class _Pending:
    """The action being read: its input events, the output since it began, and where the cursor was
    at its last input, to tell a redraw of the line being typed from an answer."""

    start_row: int
    start_scrolled: int
    inputs: list[tuple[float, str]] = field(default_factory=list)
    output: StepOutput = field(default_factory=lambda: StepOutput(_DEFAULTS.max_output_bytes))
    open: bool = True  # no key so far asked the program for something
    input_row: int = 0  # the cursor's row at the last input
    input_shifts: int = 0  # the screen's scroll count then

    def add_input(self, time: float, data: str, screen: ReplayScreen) -> None:
        self.inputs.append((time, data))
        if ends_action(key_items(data)):
            self.open = False
        self.input_row, self.input_shifts = screen.cursor.y, screen.shifts
        screen.dirty.clear()

    def joins(self, screen: ReplayScreen) -> bool:
        """True if the next input continues this action: no key ended it, and the output since the
        last input changed only the line being typed (the cursor's row then and now; a shell's
        autosuggestion or syntax colouring redraws that line on every key)."""
        if not self.open:
            return False
        then = self.input_row - (screen.shifts - self.input_shifts)
        return screen.dirty <= {then, screen.cursor.y}


@dataclass
class Replay:
    """What a recording replays into."""

    initial: Observation
    turns: list[Turn]
    markers: list[dict[str, Any]]
    exit_status: str | None
    reports_dropped: int  # the terminal's own replies taken out of the input


def replay(cast: Cast) -> Replay:
    """The screens and actions of a parsed recording (the module doc says how input is grouped)."""
    screen = ReplayScreen(cast.width, cast.height)
    stream = pyte.Stream(screen)
    output_filter = ControlStrings()  # DCS/APC/... payloads and stray controls never reach pyte
    reports = TerminalReports()
    initial: Observation | None = None
    pending: _Pending | None = None
    markers: list[dict[str, Any]] = []
    turns: list[Turn] = []
    exit_status: str | None = None
    for time, code, data in cast.events:
        if code == "i":
            data = reports.strip(data)
            if not data:
                continue  # only the terminal answering a query: nobody typed
            if pending is None:
                initial = Observation(format="terminal_screen", text=screen.text())
            elif not pending.joins(screen):
                _check_steps(turns)
                turns.append(Turn(action=_action(pending, time), observation=_observation(screen, pending)))
                pending = None
            if pending is None:
                pending = _Pending(start_row=screen.cursor.y, start_scrolled=screen.scrolled)
            pending.add_input(time, data, screen)
        elif code == "o":
            data = output_filter.feed(data)
            reports.note_output(data)
            stream.feed(data)
            if pending is not None:
                pending.output.add(data.encode())
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
    return Replay(initial, turns, markers, exit_status, reports.dropped)


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
        replayed = replay(cast)
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
        if replayed.markers:
            metadata["markers"] = replayed.markers
        if replayed.exit_status is not None:
            metadata["exit_status"] = replayed.exit_status
        if replayed.reports_dropped:
            metadata["terminal_reports_dropped"] = replayed.reports_dropped
        timestamp = header.get("timestamp")
        try:
            started = datetime.fromtimestamp(timestamp, UTC) if _number(timestamp) else None
        except (OverflowError, OSError, ValueError):
            raise BadCast(f"line 1: the timestamp {timestamp} is not a time") from None
        return Episode(
            domain="terminal",
            task=Task(id=row.row_id, metadata=metadata),
            initial=replayed.initial,
            turns=replayed.turns,
            environment=Environment(
                name="terminal",
                backend="imported",
                config={k: v for k, v in config.items() if v is not None},
            ),
            policy=Policy(name="imported", config={"recorder": "asciinema"}),
            started_at=started,
        )


IMPORTER = AsciinemaImporter()

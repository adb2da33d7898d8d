"""asciinema recordings imported as the session happened: the public recordings in
`../shared/public-samples/asciinema/` (see SOURCES.md there), and small recordings written here for
each wrong conversion those files showed: the terminal's replies to queries taken as keystrokes, a
shell's autosuggestion redraws splitting a typed command, a resize blanking the screen, and an Enter
step whose screen was read before the output it caused had settled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from collectors.importers.asciinema import Replay, parse_cast, replay
from collectors.importers.terminal_input import TerminalReports
from collectors.importers.terminal_screen import ReplayScreen
from tests.collectors.importers.test_asciinema import _cast_text
from tests.collectors.importers.test_hostile_casts import run

SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "public-samples" / "asciinema"


def _replay(events: list[list[Any]], width: int = 30, height: int = 6) -> Replay:
    return replay(parse_cast(_cast_text({"version": 2, "width": width, "height": height}, events)))


def _keys(replayed: Replay) -> list[list[str]]:
    return [[item["keystrokes"] for item in t.action.arguments["keystrokes"]] for t in replayed.turns]


def test_the_public_recordings_import_with_whole_commands_and_settled_screens(tmp_path: Path) -> None:
    assert SAMPLES.is_dir(), f"{SAMPLES} is missing: the public samples are part of the test data"
    summary, trajectories, reasons = run(SAMPLES, tmp_path / "out")
    assert reasons == {} and summary.imported == 3
    prompt = "~/c/a/asciinema (develop ↩☡=)"

    # fish with autosuggestions, vim started and left, the shell left with C-d. vim asked the
    # terminal for the cursor position and its attributes; the answers are not keys.
    demo = trajectories["asciinema_demo_v2.cast"]
    assert demo.initial_observation.text == prompt
    assert [s.action.text for s in demo.steps] == [
        '"vim" (1.24s); Enter (2.88s)',
        '":q" (1.832s); Enter (4.428s)',
        "C-d (0.002s)",
    ]
    vim = demo.steps[0].observation.text.split("\n")
    assert len(vim) == 17 and vim[:2] == ["1", "~"] and vim[-1].startswith("[No Name]")
    assert "VIM - Vi IMproved" in vim[2]
    assert demo.steps[1].observation.text == f"{prompt} vim\n{prompt}"
    assert demo.steps[2].observation.text == f"{prompt} vim\n{prompt}"
    assert demo.task.metadata["terminal_reports_dropped"] == 2
    assert demo.steps[-1].done and demo.outcome.status == "completed"

    # v3: the resize to 80x40 keeps the line drawn before it.
    full = trajectories["asciinema_full_v3.cast"]
    assert full.initial_observation.text == "żółć"
    assert [(s.action.text, s.observation.text) for s in full.steps] == [("Enter (12.1s)", "żółć")]
    assert (full.environment.config["width"], full.environment.config["height"]) == (100, 50)

    # Thirteen keys without echo: one action.
    group = trajectories["player_text_group_input.cast"]
    assert group.initial_observation.text == "start"
    assert [(s.action.text, s.observation.text) for s in group.steps] == [
        ('"ab.cdefghijkl" (1.4s)', "start\ndone")
    ]


@pytest.mark.parametrize(
    ("output", "typed", "kept"),
    [
        ("", "\x1b[2;2R\x1b[>0;95;0c", ""),  # cursor position and secondary attributes (vim)
        ("", "\x1b[?62;22c\x1b[?1;2c\x1b[0n\x1b[?2004;1$y\x1b[I\x1b[O", ""),  # DA1, status, mode, focus
        ("", "\x1b]11;rgb:0000/0000/0000\x1b\\\x1b]10;rgb:ffff/ffff/ffff\x07\x1b[?1u", ""),  # colours
        ("", "\x1bP1$r0m\x1b\\\x1bP>|XTerm(388)\x1b\\\x1b[8;24;80t", ""),  # settings, version, size
        ("", "l\x1b[5;3Rs\r", "ls\r"),  # an answer between typed keys
        ("\x1b[6n", "\x1b[1;5R", ""),  # asked for: a cursor position on row 1
        ("", "\x1b[1;5R", "\x1b[1;5R"),  # not asked for: xterm's C-F3
        ("", "\x1b[A\x1b]x\x07\x1bPq", "\x1b[A\x1b]x\x07\x1bPq"),  # keys, Alt-] and Alt-P
    ],
)
def test_terminal_reports_are_taken_out_of_the_input(output: str, typed: str, kept: str) -> None:
    reports = TerminalReports()
    reports.note_output(output)
    assert reports.strip(typed) == kept


def test_answers_to_queries_are_not_keys_and_the_enter_step_shows_the_program() -> None:
    events = [
        [0.1, "o", "$ "],
        [1.0, "i", "t"],
        [1.01, "o", "t"],
        [1.1, "i", "\x1b[I"],  # the window got the focus back while typing
        [1.2, "i", "op"],
        [1.21, "o", "op"],
        [1.5, "i", "\r"],
        # top takes the alternate screen, asks where the cursor is and what the terminal is.
        [1.51, "o", "\r\n\x1b[?1049h\x1b[H\x1b[2J\x1b[6n\x1b[c"],
        [1.52, "i", "\x1b[1;1R\x1b[?62;22c"],
        [1.6, "o", "load 0.10\r\n  PID CMD\r\n    1 init"],
        [4.0, "i", "q"],
        [4.01, "o", "\x1b[?1049l\r$ "],
    ]
    replayed = _replay(events)
    assert _keys(replayed) == [["top", "Enter"], ["q"]]
    assert [t.observation.text for t in replayed.turns] == ["load 0.10\n  PID CMD\n    1 init", "$ top\n$"]
    assert replayed.reports_dropped == 3


def test_autosuggestion_and_colouring_redraws_keep_a_typed_command_one_action() -> None:
    grey, green, plain = "\x1b[90m", "\x1b[32m", "\x1b[0m"
    events = [
        [0.1, "o", "$ "],
        [1.0, "i", "g"],
        [1.01, "o", f"g{grey}it status{plain}\x1b[9D"],  # the suggestion after the cursor
        [1.2, "i", "i"],
        [1.21, "o", f"i{grey}t status{plain}\x1b[8D"],
        [1.4, "i", "t"],
        [1.41, "o", f"\r\x1b[K$ {green}git{plain}{grey} status{plain}\x1b[7D"],  # the line redrawn whole
        [1.6, "i", "\x1b[C"],  # Right takes the suggestion
        [1.61, "o", f"\r\x1b[K$ {green}git{plain} status"],
        [2.0, "i", "\r"],
        [2.01, "o", "\r\nOn branch main\r\n$ "],
        # A program answering on another row between two keys ends the action there.
        [3.0, "i", "y"],
        [3.01, "o", "y\r\nanswered\r\n$ "],
        [3.5, "i", "n"],
        [3.51, "o", "n"],
    ]
    replayed = _replay(events)
    assert _keys(replayed) == [["git", "Right", "Enter"], ["y"], ["n"]]
    assert replayed.turns[0].action.text == '"git" (0.6s); Right (0.4s); Enter (1s)'
    assert replayed.turns[0].observation.text == "$ git status\nOn branch main\n$"
    assert replayed.turns[1].observation.text == "$ git status\nOn branch main\n$ y\nanswered\n$"


def test_a_command_that_wraps_and_scrolls_at_the_bottom_of_the_screen_stays_one_action() -> None:
    events: list[list[Any]] = [[0.1, "o", "a\r\nb\r\n$ "]]
    for i, char in enumerate(": 1234567890"):
        events += [[1.0 + 0.1 * i, "i", char], [1.01 + 0.1 * i, "o", char]]
    events += [[3.0, "i", "\r"], [3.01, "o", "\r\n$ "]]
    replayed = _replay(events, width=10, height=3)
    assert _keys(replayed) == [[": 1234567890", "Enter"]]
    assert replayed.turns[0].observation.text == "$ : 123456\n7890\n$"


def test_the_observation_waits_for_output_that_comes_late_until_the_next_key() -> None:
    events = [
        [0.1, "o", "$ "],
        [1.0, "i", "make\r"],
        [1.01, "o", "make\r\n"],
        [2.5, "o", "cc main.c\r\n"],
        [9.0, "o", "done\r\n$ "],
        [12.0, "i", "\x04"],
        [12.01, "o", "exit\r\n"],
        [13.0, "o", "logout"],
    ]
    replayed = _replay(events)
    assert [(t.action.text, t.observation.text) for t in replayed.turns] == [
        ('"make" (0s); Enter (11s)', "$ make\ncc main.c\ndone\n$"),
        ("C-d (1s)", "$ make\ncc main.c\ndone\n$ exit\nlogout"),
    ]


def test_a_resize_keeps_the_screen_as_tmux_does() -> None:
    events = [
        [0.1, "o", "one\r\ntwo\r\n$ "],
        [0.5, "r", "30x4"],  # shorter: blank rows below the cursor go (pyte dropped "one")
        [1.0, "i", "ls\r"],
        [1.01, "o", "ls\r\nfile\r\n$ "],
        [2.0, "r", "2x3"],  # narrower: rows cut; shorter with the cursor at the bottom: the top row goes
        [2.5, "r", "20x5"],  # taller and wider: blank rows and columns added
        [2.51, "o", "\r\x1b[K$ "],  # the shell redraws its prompt (SIGWINCH)
        [3.0, "i", "pwd\r"],
        [3.01, "o", "pwd\r\n/home\r\n$ "],
    ]
    replayed = _replay(events, width=30, height=6)
    assert replayed.initial.text == "one\ntwo\n$"
    # The ls step ends on the screen its next key saw: "two", "$ ls", "file", "$ " cut to two columns
    # and three rows.
    assert [t.observation.text for t in replayed.turns] == ["$\nfi\n$", "$\nfi\n$ pwd\n/home\n$"]


def test_a_shorter_screen_pushes_the_top_rows_off_when_the_cursor_is_low() -> None:
    screen = ReplayScreen(10, 5)
    screen.draw("a")
    for row in "bcd":
        screen.linefeed()
        screen.carriage_return()
        screen.draw(row)
    screen.resize(lines=2, columns=10)
    assert (screen.text(), screen.cursor.y, screen.scrolled) == ("c\nd", 1, 2)
    screen.resize(lines=4, columns=10)
    screen.draw("!")
    assert (screen.text(), screen.cursor.y) == ("c\nd!", 1)

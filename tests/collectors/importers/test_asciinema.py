"""asciinema recordings through the real CLI, and against our own terminal sandbox.

The samples are asciicast files as asciinema writes them (https://docs.asciinema.org/manual/asciicast/v2/
and /v3/). The sandbox test records a real session of our bwrap terminal sandbox as an asciicast v2
file (the pane's raw output bytes, timed as tmux delivers them, and the keys as "i" events, which is
what `asciinema rec --stdin` writes for a shell), imports it, and checks that every imported screen is
the sandbox's own observation of the same step.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collectors.importers.asciinema import parse_cast, replay
from collectors.importers.base import BadRow
from collectors.importers.terminal_input import key_items
from sandboxes.terminal import TerminalConfig, TerminalSandbox, keystrokes_action, make_backend
from sandboxes.terminal import sandbox as sandbox_module
from sandboxes.terminal.shell import ShellStream
from schemas import read_trajectories
from schemas.records import Task, Trajectory

ROOT = Path(__file__).resolve().parents[3]
TERM_ENV = {"SHELL": "/bin/bash", "TERM": "xterm-256color"}


def _cast_text(header: dict[str, Any], events: list[list[Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for line in [header, *events])


def _typed(start: float, text: str) -> list[list[Any]]:
    """A person typing `text` key by key, each key echoed by the shell 10 ms later."""
    events: list[list[Any]] = []
    for i, char in enumerate(text):
        events += [[round(start + 0.1 * i, 3), "i", char], [round(start + 0.1 * i + 0.01, 3), "o", char]]
    return events


SHELL_SESSION = [
    [0.1, "o", "$ "],
    *_typed(1.0, "echo hi"),
    [2.0, "i", "\r"],
    [2.01, "o", "\r\nhi\r\n$ "],
    [3.0, "m", "checkpoint"],
    [4.0, "i", "sleep 9\r"],
    [4.01, "o", "sleep 9\r\n"],
    [5.0, "i", "\x03"],
    [5.01, "o", "^C\r\n$ "],
    [6.0, "r", "50x6"],
    [7.0, "i", "seq 8\r"],
    [7.01, "o", "seq 8\r\n" + "".join(f"{n}\r\n" for n in range(1, 9)) + "$ "],
    [9.5, "o", ""],
]
# asciicast v3: intervals, a comment, a full-screen program on the alternate screen, an exit status.
PAGER_SESSION = [
    [0.1, "o", "$ "],
    [0.4, "i", "less notes\r"],
    [0.01, "o", "less notes\r\n"],
    [0.05, "o", "\x1b[?1049h\x1b[H\x1b[2Jfirst line\r\n\x1b[7m(END)\x1b[27m"],
    [1.0, "i", "q"],
    [0.01, "o", "\x1b[2J\x1b[?1049l\r$ "],
    [0.5, "x", "0"],
]


def write_sample(directory: Path) -> Path:
    """Two recordings as asciinema writes them: a v2 shell session typed key by key, a v3 pager."""
    folder = directory / "asciinema"
    folder.mkdir(parents=True, exist_ok=True)
    v2 = {"version": 2, "width": 40, "height": 6, "timestamp": 1700000000, "idle_time_limit": 2.0}
    (folder / "shell.cast").write_text(_cast_text({**v2, "title": "Demo", "env": TERM_ENV}, SHELL_SESSION))
    v3 = {"version": 3, "term": {"cols": 30, "rows": 4, "type": "xterm-256color"}, "timestamp": 1700000100}
    lines = _cast_text({**v3, "command": "bash", "env": {"SHELL": "/bin/bash"}}, PAGER_SESSION).splitlines()
    lines.insert(1, "# the event stream follows the header")
    (folder / "pager.cast").write_text("\n".join(lines) + "\n")
    return folder


def _import(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "collectors.importers", "asciinema", "--no-progress", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _steps(trajectory: Trajectory) -> list[tuple[str, str]]:
    return [(s.action.text, s.observation.text) for s in trajectory.steps]


def test_recordings_import_through_the_cli_with_screens_dead_letters_and_resume(tmp_path: Path) -> None:
    casts = write_sample(tmp_path)
    (casts / "broken.cast").write_text(
        _cast_text({"version": 2, "width": 10, "height": 2}, [])[:-1] + "\n[1.0,"
    )
    (casts / "no-input.cast").write_text(
        _cast_text({"version": 2, "width": 10, "height": 2}, [[0.1, "o", "$ ls\r\n"]])
    )
    out = tmp_path / "out"
    args = ["--input", str(casts), "--out", str(out), "--dataset", "team/casts", "--license", "CC0-1.0"]
    done = _import(*args)
    assert done.returncode == 0, done.stderr
    assert "imported 2 of 4 rows" in done.stdout, done.stdout

    by_name = {
        t.provenance.source.row_id.split("@")[0]: t for t in read_trajectories(str(out), validate=True)
    }
    shell, pager = by_name["shell.cast"], by_name["pager.cast"]
    assert shell.domain == "terminal" and shell.initial_observation.text == "$"
    assert _steps(shell)[:3] == [
        ('"echo hi" (1s); Enter (2s)', "$ echo hi\nhi\n$"),
        ('"sleep 9" (0s); Enter (1s)', "$ echo hi\nhi\n$ sleep 9"),
        ("C-c (2s)", "$ echo hi\nhi\n$ sleep 9\n^C\n$"),
    ]
    # Nine rows of output on a six-row screen: the four that scrolled off (beyond the four old rows
    # above the cursor) are counted as the sandbox counts them, the whole output attached.
    last = shell.steps[3]
    assert last.action.text == '"seq 8" (0s); Enter (2.5s)'
    assert last.observation.text == (
        "[... 4 lines of output not shown; full output in attachment output.txt]\n4\n5\n6\n7\n8\n$"
    )
    assert last.observation.data == {"output_bytes": 33, "output_truncated": True}
    (attachment,) = last.observation.attachments
    plain = b"seq 8\n1\n2\n3\n4\n5\n6\n7\n8\n$ "  # escape sequences dropped, CR LF to LF
    assert (attachment.name, attachment.sha256) == ("output.txt", hashlib.sha256(plain).hexdigest())
    assert (out / attachment.uri).read_bytes() == plain
    assert shell.steps[-1].done and shell.outcome.status == "completed"
    assert shell.environment.name == "terminal" and shell.environment.backend == "imported"
    assert shell.environment.config == {
        "width": 40,
        "height": 6,
        "term": "xterm-256color",
        "shell": "/bin/bash",
        "recorder": "asciinema (asciicast v2)",
    }
    assert shell.task.metadata["title"] == "Demo"
    assert shell.task.metadata["markers"] == [{"time": 3.0, "label": "checkpoint", "step": 0}]
    assert shell.provenance.started_at.timestamp() == 1700000000
    source = shell.provenance.source
    assert (source.dataset, source.format, source.license) == ("team/casts", "asciinema", "CC0-1.0")
    assert source.uri.endswith("asciinema/shell.cast") and source.row_id.startswith("shell.cast@")

    # Leaving the pager gives the shell's screen back, as a real terminal's alternate screen does.
    assert _steps(pager) == [
        ('"less notes" (0s); Enter (1.06s)', "first line\n(END)"),
        ('"q" (0.51s)', "$ less notes\n$"),
    ]
    assert pager.environment.config["width"] == 30 and pager.task.metadata["exit_status"] == "0"

    dead = {
        json.loads(line)["row_id"].split("@")[0]: json.loads(line)
        for line in (out / "dead_letter" / "import-asciinema.jsonl").read_text().splitlines()
    }
    assert set(dead) == {"broken.cast", "no-input.cast"}
    assert dead["broken.cast"]["reason"].startswith("line 2: the event is not JSON")
    assert "asciinema rec --stdin" in dead["no-input.cast"]["reason"]

    again = _import(*args)
    assert again.returncode == 0, again.stderr
    assert (
        "imported 0 of 4 rows" in again.stdout
        and "already imported by an earlier run (skipped): 2" in again.stdout
    )
    assert len(list(read_trajectories(str(out)))) == 2


@pytest.mark.parametrize(
    ("data", "keys"),
    [
        ("ls -la\r", [("ls -la", False), ("Enter", True)]),
        ("\x03\x04\t\x7f\x1b", [(k, True) for k in ("C-c", "C-d", "Tab", "BSpace", "Escape")]),
        (
            "\x1b[A\x1bOB\x1b[1;5C\x1b[3~\x1b[Z",
            [(k, True) for k in ("Up", "Down", "C-Right", "Delete", "BTab")],
        ),
        ("\x1bb\x1bOP\x1b[24~\x1c", [(k, True) for k in ("M-b", "F1", "F12", "C-\\")]),
        # xterm's modified keys: F1-F4 as CSI 1;m P-S, the others as CSI n;m ~.
        ("\x1b[1;2R\x1b[1;5P\x1b[15;5~\x1b[3;3~", [(k, True) for k in ("S-F3", "C-F1", "C-F5", "M-Delete")]),
        ("\x1b[200~päste\rme\x1b[201~", [("päste", False), ("Enter", True), ("me", False)]),
    ],
)
def test_typed_bytes_become_tmux_key_names(data: str, keys: list[tuple[str, bool]]) -> None:
    assert key_items(data) == keys


def test_resize_reflows_later_output_and_typed_key_names_stay_text() -> None:
    header = {"version": 2, "width": 10, "height": 3}
    events = [[0.0, "o", "$ "], [0.5, "r", "20x3"], [1.0, "i", "Up"], [1.2, "o", "Up"], [1.5, "i", "\r"]]
    events.append([1.6, "o", "\r\n" + "x" * 15])
    replayed = replay(parse_cast(_cast_text(header, events)))
    assert replayed.initial.text == "$"
    (turn,) = replayed.turns
    # Typed letters that spell a key name are sent as two literal parts, never pressed as the key.
    assert turn.action.arguments["keystrokes"] == [
        {"keystrokes": "U", "duration": 0.0},
        {"keystrokes": "p", "duration": 0.5},
        {"keystrokes": "Enter", "duration": 0.1},
    ]
    assert turn.observation.text == "$ Up\n" + "x" * 15


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"version": 1, "width": 80, "height": 24, "stdout": []}\n', "line 1: asciicast version 1"),
        ('{"version": 2, "width": 0, "height": 24}\n', "line 1: the header needs a positive integer"),
        ('{"version": 2, "width": 8, "height": 2}\n[1, "o", "a"]\n[0.5, "o", "b"]\n', "line 3: time 0.5"),
        ('{"version": 2, "width": 8, "height": 2}\n\n[1, "r", "wide"]\n', "line 3: a resize event"),
        ('{"version": 2, "width": 8, "height": 2}\n{"t": 1}\n', "line 2: an event should be"),
    ],
)
def test_malformed_recordings_name_the_line(text: str, reason: str) -> None:
    with pytest.raises(BadRow, match="^" + reason.replace("(", r"\(")):
        parse_cast(text)


class _RecordingStream(ShellStream):
    """The sandbox's own reader of the pane's output, also keeping each chunk with its arrival time."""

    def __init__(self, output_cap: int) -> None:
        super().__init__(output_cap)
        self.started = time.monotonic()
        self.chunks: list[tuple[float, bytes]] = []

    def feed(self, chunk: bytes) -> None:
        self.chunks.append((time.monotonic(), chunk))
        super().feed(chunk)


# The bytes a terminal sends for the keys this session presses.
_KEY_BYTES = {"Enter": "\r", "C-c": "\x03"}
SESSION = [
    [("echo hello", 0.2), ("Enter", 3.0)],
    [("printf 'a\\nb\\n'", 0.2), ("Enter", 3.0)],
    [("sleep 30", 0.2), ("Enter", 0.5)],
    [("C-c", 3.0)],
    [("seq 1 30", 0.2), ("Enter", 3.0)],  # scrolls past the 12-row screen
]


@pytest.mark.bwrap
@pytest.mark.tmux
def test_imported_screens_equal_the_sandbox_observations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_module, "ShellStream", _RecordingStream)
    sandbox = TerminalSandbox(TerminalConfig(backend=make_backend("bwrap"), width=80, height=12))
    try:
        observations = [sandbox.reset(Task(id="cast"))]
        stream = sandbox._live.stream  # the live environment's stream (a spare one boots beside it)
        assert isinstance(stream, _RecordingStream)
        inputs: list[tuple[float, str]] = []
        for items in SESSION:
            inputs.append((time.monotonic(), "".join(_KEY_BYTES.get(k, k) for k, _ in items)))
            observations.append(sandbox.step(keystrokes_action(items)).observation)
        chunks = list(stream.chunks)
    finally:
        sandbox.close()

    decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a chunk may end inside a character
    events = [(t, "o", decoder.decode(data)) for t, data in chunks] + [(t, "i", d) for t, d in inputs]
    events.sort(key=lambda event: event[0])
    header = {"version": 2, "width": 80, "height": 12, "timestamp": int(time.time()), "env": TERM_ENV}
    lines = [[round(t - stream.started, 6), code, data] for t, code, data in events if data]
    cast = tmp_path / "casts" / "sandbox.cast"
    cast.parent.mkdir()
    cast.write_text(_cast_text(header, lines))

    out = tmp_path / "out"
    done = _import("--input", str(cast.parent), "--out", str(out), "--dataset", "sandbox-session")
    assert done.returncode == 0, done.stderr
    (imported,) = read_trajectories(str(out), validate=True)
    assert imported.initial_observation.text == observations[0].text == "agent@sandbox:~$"
    assert [s.observation.text for s in imported.steps] == [o.text for o in observations[1:]]
    assert [[item["keystrokes"] for item in s.action.arguments["keystrokes"]] for s in imported.steps] == [
        [keys for keys, _ in items] for items in SESSION
    ]
    assert "hello" in imported.steps[0].observation.text and "a\nb\n" in imported.steps[1].observation.text
    scrolled = imported.steps[-1].observation
    assert scrolled.text.startswith("[... ") and observations[-1].data["output_truncated"] is True

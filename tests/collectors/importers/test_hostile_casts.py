"""Hostile asciinema recordings: huge terminals are refused quickly, and escape sequences and control
characters reach neither the stored metadata nor the replayed screens.

Each test writes its recordings and imports them with the real importer and import loop.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from collectors.importers.asciinema import IMPORTER as ASCIINEMA
from collectors.importers.asciinema import MAX_COLUMNS, MAX_LINES, MAX_STEPS
from collectors.importers.base import ImportContext
from collectors.importers.run import ImportSummary, import_rows
from collectors.importers.terminal_text import ControlStrings
from schemas import read_trajectories
from schemas.records import Trajectory
from tests.collectors.importers.test_asciinema import SHELL_SESSION, _cast_text, _typed

CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # tab and newline are text on a screen
HEADER = {"version": 2, "width": 40, "height": 6, "timestamp": 1700000000}


def run(folder: Path, out: Path) -> tuple[ImportSummary, dict[str, Trajectory], dict[str, str]]:
    """Import every .cast in `folder`: the summary, trajectories and dead-letter reasons by file name."""
    context = ImportContext(dataset="casts", version="", license="CC0-1.0", collector_version="t", host="h")
    summary = import_rows(ASCIINEMA, [str(folder)], str(out), context, progress=False)
    trajectories = {t.task.id.split("@")[0]: t for t in read_trajectories(str(out), validate=True)}
    dead_path = Path(summary.dead_letter_path)
    lines = dead_path.read_text().splitlines() if dead_path.exists() else []
    reasons = {json.loads(d)["row_id"].split("@")[0]: json.loads(d)["reason"] for d in lines}
    return summary, trajectories, reasons


def write(folder: Path, name: str, header: dict[str, Any], events: list[list[Any]]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(_cast_text(header, events))


def screens(trajectory: Trajectory) -> list[str]:
    return [trajectory.initial_observation.text, *(s.observation.text for s in trajectory.steps)]


def test_a_million_by_million_terminal_is_refused_in_seconds_and_the_others_import(tmp_path: Path):
    casts = tmp_path / "casts"
    after_first_command = 17  # events; the resize comes between two in time
    resized = [
        *SHELL_SESSION[:after_first_command],
        [2.5, "r", "1000000x1000000"],
        *SHELL_SESSION[after_first_command:],
    ]
    write(casts, "resize.cast", {**HEADER, "title": "resize"}, resized)
    write(casts, "header.cast", {**HEADER, "width": 1_000_000, "height": 1_000_000}, SHELL_SESSION)
    write(casts, "digits.cast", HEADER, [[0.05, "r", "9" * 5000 + "x24"], *SHELL_SESSION])
    write(casts, "fine.cast", {**HEADER, "width": MAX_COLUMNS, "height": MAX_LINES}, SHELL_SESSION)

    started = time.monotonic()
    summary, trajectories, reasons = run(casts, tmp_path / "out")
    elapsed = time.monotonic() - started

    assert elapsed < 30, f"{elapsed:.1f} s"  # on main the resize ran for minutes and wrote nothing
    assert list(trajectories) == ["fine.cast"] and summary.imported == 1
    limit = f"is over the {MAX_COLUMNS}x{MAX_LINES} limit"
    assert reasons == {
        "resize.cast": f"line {after_first_command + 2}: a terminal of 1000000x1000000 {limit}",
        "header.cast": f"line 1: a terminal of 1000000x1000000 {limit}",
        "digits.cast": f"line 2: a terminal of {'9' * 20}x24 {limit}",
    }
    assert trajectories["fine.cast"].environment.config["width"] == MAX_COLUMNS


def test_escape_sequences_and_control_bytes_of_the_header_never_reach_the_metadata(tmp_path: Path):
    casts = tmp_path / "casts"
    header = {
        **HEADER,
        "title": "\x1b]0;pwned\x07Build \x1b[31mlog\x1b[0m\x07\x1b\x9b2J\x00 of\tthe\r\nday\x85",
        "command": "bash\x1b[2J\x1bPpayload\x1b\\ -l\x07",
        "tags": ["\x1b[1mbold\x1b[0m", {"\x07key": "\x1b]52;c;Y29weQ==\x07value"}],
        "env": {"SHELL": "/bin/bash\x1b[8m", "TERM": "xterm\x07-256color"},
    }
    events = [[e[0], "m", "mark\x1b]2;x\x07er\x07"] if e[1] == "m" else e for e in SHELL_SESSION]
    write(casts, "title.cast", header, events)

    _, trajectories, reasons = run(casts, tmp_path / "out")

    assert reasons == {}
    trajectory = trajectories["title.cast"]
    metadata = trajectory.task.metadata
    assert metadata["title"] == "Build log of the  day "
    assert metadata["command"] == "bash -l"
    assert metadata["tags"] == ["bold", {"key": "value"}]
    assert [m["label"] for m in metadata["markers"]] == ["marker"]
    config = trajectory.environment.config
    assert (config["shell"], config["term"]) == ("/bin/bash", "xterm-256color")
    stored = json.dumps([metadata, config], ensure_ascii=False)
    assert not CONTROLS.search(stored), stored


def test_dcs_and_other_string_payloads_are_consumed_not_shown(tmp_path: Path):
    casts = tmp_path / "casts"
    payloads = [
        [0.1, "o", "$ "],
        *_typed(1.0, "img"),
        [2.0, "i", "\r"],
        # A sixel image (DCS), split across two output events in the middle of its payload and of its
        # ST, then the 8-bit DCS, an APC, a PM, a SOS, an OSC and stray C0/C1 controls.
        [2.01, "o", "\r\nbefore\x1bPq#0;2;0;0;0#0!20~-#0!2"],
        [2.02, "o", "0~\x1b"],
        [2.03, "o", "\\after \x90secret\x9c\x1b_apc payload\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\"],
        [2.04, "o", "\x1b]8;;https://example.com\x07link\x1b]8;;\x07 \x01\x02ctl\x85\x9a ok\r\n$ "],
        *_typed(3.0, "echo done"),
        [4.0, "i", "\r"],
        [4.01, "o", "\r\ndone\r\n$ "],
    ]
    write(casts, "dcs.cast", HEADER, payloads)

    _, trajectories, reasons = run(casts, tmp_path / "out")

    assert reasons == {}
    shown = screens(trajectories["dcs.cast"])
    assert shown[1] == "$ img\nbeforeafter link ctl ok\n$"
    assert shown[2] == "$ img\nbeforeafter link ctl ok\n$ echo done\ndone\n$"
    for screen in shown:
        assert not CONTROLS.search(screen)
        assert not any(word in screen for word in ("#0", "~", "secret", "payload", "pm", "sos", "http"))


def test_the_output_filter_keeps_state_across_chunks_as_a_terminal_does() -> None:
    stream = ControlStrings()
    fed = [
        "a\x1b",
        "Pq",
        "uiet\x1b",
        "\\b\x1b[1m",
        "c\x1bPx\x1b[2md\x1b",
        "]0;t",
        "itle\x07e\x18f\x1bPz\x18g",
    ]
    # ESC then P across a chunk starts a DCS; an ESC that is not ST ends one and starts its own
    # sequence (CSI kept for pyte); CAN aborts a string and is dropped outside one.
    assert "".join(stream.feed(chunk) for chunk in fed) == "ab\x1b[1mc\x1b[2mdefg"


def test_too_many_actions_are_refused_and_raw_line_separators_stay_inside_their_event(tmp_path: Path):
    casts = tmp_path / "casts"
    presses = [
        [round(0.001 * i, 3), "io"[i % 2], "\r" if i % 2 == 0 else "\r\n"] for i in range(2 * MAX_STEPS + 2)
    ]
    write(casts, "many.cast", {**HEADER, "width": 10, "height": 2}, presses)
    write(casts, "most.cast", {**HEADER, "width": 10, "height": 2}, presses[:-2])  # at the limit
    # U+2028 and U+0085 are text inside a JSON string; the file was split at them, breaking the event.
    events = [HEADER, [0.1, "o", "$ "], [1.0, "i", "x\r"], [1.1, "o", "x\r\na\x85b\r\n$ "]]
    events.append([1.2, "m", "one\u2028two"])
    (casts / "separators.cast").write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events))

    _, trajectories, reasons = run(casts, tmp_path / "out")

    assert reasons == {"many.cast": f"the recording has over {MAX_STEPS:,} actions (the limit)"}
    assert len(trajectories["most.cast"].steps) == MAX_STEPS
    separators = trajectories["separators.cast"]
    assert screens(separators) == ["$", "$ x\nab\n$"]  # U+0085, a C1 control, is not drawn
    assert [m["label"] for m in separators.task.metadata["markers"]] == ["one two"]

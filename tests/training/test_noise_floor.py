"""The noise floor on real sandboxes: what differs between real runs of the same actions is volatile."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from schemas.records import Environment, Task
from tests.training.test_fidelity_ceiling import trajectory
from training.fidelity.metrics import score_turn
from training.fidelity.noise_floor import volatile_template
from training.fidelity.replay import ReplayStore, replay_actions, run_replays

COMMANDS = ["echo hi", "date", "mktemp", "echo $$", "pwd"]


def real_runs(backend: str, commands: list[str], runs: int = 3) -> list[list[str]]:
    """The same commands in `runs` fresh real environments, a second apart so clocks differ."""
    for tool in ("tmux", "bwrap") if backend == "bwrap" else ("tmux",):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (apt-get install {tool})")
    actions = [command_action(c) for c in commands]
    sandbox = TerminalSandbox(TerminalConfig(backend=make_backend(backend)))
    found = []
    try:
        for run in range(runs):
            if run:
                time.sleep(1.05)
            observations, error = replay_actions(sandbox, Task(id="noise-floor"), actions)
            assert error == "" and len(observations) == len(actions)
            found.append(observations)
    finally:
        sandbox.close()
    return found


def new_output(before: str, after: str) -> str:
    """The part of the (cumulative) screen that one command added."""
    assert after.startswith(before.rsplit("\n", 1)[0])
    return after[len(before.rsplit("\n", 1)[0]) :]


@pytest.mark.bwrap
@pytest.mark.tmux
def test_bwrap_replays_find_date_and_temp_names_volatile_and_echo_stable() -> None:
    recorded, *replays = real_runs("bwrap", COMMANDS)
    templates = [volatile_template(recorded[k], [r[k] for r in replays]) for k in range(len(COMMANDS))]
    volatile_text = [[s.text for s in t.volatile_spans] for t in templates]
    assert volatile_text[0] == [], "echo hi differed between real runs"
    # date: the seconds moved between runs; nothing of the echo before it is volatile
    assert volatile_text[1] and all(text.strip().isdigit() for text in volatile_text[1])
    # mktemp: the random suffix of /tmp/tmp.XXXXXXXXXX, and only that
    assert [text for text in volatile_text[2] if len(text) >= 6], volatile_text[2]
    assert volatile_text[2][-1] in recorded[2] and "/tmp/tmp." in new_output(recorded[1], recorded[2])
    # A pid namespace per sandbox makes the shell's pid the same in every run: not volatile here.
    assert volatile_text[3] == volatile_text[2]
    # pwd adds nothing volatile: its spans are those the screen already held
    assert volatile_text[4] == volatile_text[3]
    # Real vs real: a replay scored against a template built without it.
    held_out = volatile_template(recorded[2], [replays[1][2]])
    score = score_turn("terminal", replays[0][2], held_out)
    assert score.format_valid and not score.exact and score.edit_similarity > 0.9


@pytest.mark.tmux
def test_local_shell_pids_are_volatile() -> None:
    # Without a pid namespace (the local backend: `echo $$` only) each run's shell gets a new pid.
    runs = real_runs("local", ["echo $$"])
    template = volatile_template(runs[0][0], [r[0] for r in runs[1:]])
    spans = template.volatile_spans
    assert len(spans) == 1 and spans[0].text.isdigit() and spans[0].form() == r"(?:\d+)"
    assert score_turn("terminal", runs[0][0].replace(spans[0].text, "99999"), template).volatile_form == 1.0


@pytest.mark.bwrap
@pytest.mark.tmux
def test_failed_replays_are_retried_in_fresh_sandboxes_counted_and_resumed(tmp_path: Path) -> None:
    good = trajectory(
        ["x"], "good", environment=Environment("terminal", "bwrap", "", {"width": 100, "height": 20})
    )
    good.steps[0].action = command_action("echo $COLUMNS")
    bad = trajectory(["x"], "bad", environment=Environment("terminal", "bwrap"))
    # A setup command that fails breaks every try at reset (an action the sandbox refuses would not:
    # replays answer it as the runner recorded it, `invalid action: ...`).
    bad.task.setup = ["false"]
    store = ReplayStore(tmp_path / "replays.jsonl")
    found = run_replays([good, bad], 1, store, attempts=2, progress=False)
    (ok,), (failed,) = found["good"], found["bad"]
    assert ok.error == "" and ok.attempts == 1
    assert ok.observations[0].rstrip().split("\n")[-2].strip() == "100"  # the recorded screen width
    assert failed.error and failed.attempts == 2 and failed.observations == []
    # A rerun keeps the finished replay and tries the failed one again.
    again = run_replays([good, bad], 1, ReplayStore(tmp_path / "replays.jsonl"), attempts=1, progress=False)
    assert again["good"][0] == ok and again["bad"][0].attempts == 1

"""Explorer, replay and scripted policies against real bwrap-isolated shells."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.policies import make_policy
from collectors.runner import FleetConfig, FleetSummary, run_fleet
from collectors.tasks import TaskSpec, embedded_tasks
from collectors.terminal.explorer import ExplorerPolicy
from collectors.terminal.screen import command_programs, parse_listing, screen_mode
from sandboxes.terminal import TerminalConfig, TerminalSandbox, make_backend, parse_action
from schemas.records import Task, Trajectory
from tests.collectors.conftest import assert_exactly_once, trajectories


def run(
    out: Path, policy: str, specs: list[TaskSpec], episodes: int, seed: int = 0, **opts: object
) -> FleetSummary:
    config = TerminalConfig(backend=make_backend("bwrap"), command_timeout=5.0)
    return run_fleet(
        FleetConfig(
            domain="terminal",
            sandbox_factory=lambda: TerminalSandbox(config),
            policy_factory=lambda: (
                ExplorerPolicy(**opts) if policy == "explorer" else make_policy(policy, **opts)
            ),
            tasks=specs,
            out=str(out),
            sandboxes=2,
            episodes=episodes,
            max_steps=8,
            seed=seed,
            progress=False,
            handle_signals=False,
        )
    )


def actions_by_slot(found: list[Trajectory]) -> dict[int, list[tuple[str, dict]]]:
    return {t.task.metadata["slot"]: [(s.action.kind, s.action.arguments) for s in t.steps] for t in found}


# A terminal's screen, and the program the explorer reads it as (None: a screen it does not know).
SCREENS = [
    ("agent@sandbox:~/repo$ ", "shell"),
    ("Python 3.11.2\n>>> 2 + 2\n4\n>>>", "python"),
    ("line\nline 2\n(END)", "less"),
    ('hello\n~\n~\n~\n~\n"notes.txt" 1L, 6B', "vim"),
    ("top - 10:00:01 up 1 day\nTasks:   3 total", "top"),
    ("18446744073709551616", None),
]


def test_screen_reading() -> None:
    for screen, mode in SCREENS:
        assert screen_mode(screen) == mode, screen
    assert command_programs("cd repo && git log | head -3; FOO=1 python3 x.py") == [
        "cd",
        "git",
        "head",
        "python3",
    ]
    listing = ["total 8", "drwxr-xr-x 2 a a 4096 May 1 10:00 src", "-rw-r--r-- 1 a a 12 May 1 10:00 app.py"]
    assert parse_listing(listing) == (["app.py"], ["src"])
    assert parse_listing(["build/  notes.txt  run.sh*"]) == (["notes.txt", "run.sh"], ["build"])


@pytest.mark.bwrap
def test_explorer_is_deterministic_per_seed(tmp_path: Path, bwrap: None) -> None:
    tasks = embedded_tasks("terminal")[:3]
    run(tmp_path / "a", "explorer", tasks, 3, seed=7)
    run(tmp_path / "b", "explorer", tasks, 3, seed=7)
    run(tmp_path / "c", "explorer", tasks, 3, seed=8)
    a, b, c = (actions_by_slot(trajectories(tmp_path / x)) for x in "abc")
    for slot in range(3):
        assert a[slot][:4] == b[slot][:4], f"slot {slot}: same seed, different first actions"
    assert any(a[slot][:4] != c[slot][:4] for slot in range(3)), "another seed should change the session"


@pytest.mark.bwrap
def test_replay_plays_a_recorded_dataset_step_for_step(tmp_path: Path, bwrap: None) -> None:
    tasks = embedded_tasks("terminal")[10:14]
    recorded = run(tmp_path / "rec", "explorer", tasks, 6, seed=3)
    assert recorded.trajectories == 6
    recording = make_policy("replay", dataset=str(tmp_path / "rec"))
    replayed = run(
        tmp_path / "rep", "replay", recording.task_specs(), recording.episode_count, recording=recording
    )
    assert replayed.trajectories == 6
    original, again = trajectories(tmp_path / "rec"), assert_exactly_once(tmp_path / "rep", 6)
    assert actions_by_slot(again) == actions_by_slot(original)
    assert {t.task.metadata["slot"]: t.task.id for t in again} == {
        t.task.metadata["slot"]: t.task.id for t in original
    }
    # Deterministic commands show the same screen in both runs (sim-vs-real needs this baseline).
    rec = {t.task.metadata["slot"]: t for t in original}
    same = sum(
        s.observation.text == r.observation.text
        for t in again
        for s, r in zip(t.steps, rec[t.task.metadata["slot"]].steps, strict=True)
    )
    assert same >= 0.5 * sum(len(t.steps) for t in again)


@pytest.mark.bwrap
def test_scripted_policy_and_invalid_actions(tmp_path: Path, bwrap: None) -> None:
    spec = TaskSpec(
        task=Task(id="scripted", setup=["echo hello > greeting.txt"]),
        actions=[
            {"command": "cat greeting.txt"},
            {"kind": "teleport", "arguments": {}},
            {
                "keystrokes": [
                    {"keystrokes": "echo typed", "duration": 0.1},
                    {"keystrokes": "Enter", "duration": 1},
                ]
            },
        ],
    )
    summary = run(tmp_path / "s", "scripted", [spec], 1, tasks=[spec], parse_action=parse_action)
    (t,) = trajectories(tmp_path / "s")
    assert t.outcome.status == "completed" and summary.invalid_actions == 1
    assert t.steps[0].observation.text.splitlines()[-2] == "hello"
    # The policy's parser rejected it: recorded as an `invalid` action, never sent.
    assert t.steps[1].action.kind == "invalid" and t.steps[1].observation.format == "error"
    assert "teleport" in t.steps[1].observation.text
    assert "typed" in t.steps[2].observation.text.splitlines()[-2]
    # Without a parser the sandbox itself rejects it (InvalidActionError); the episode goes on.
    summary = run(tmp_path / "raw", "scripted", [spec], 1, tasks=[spec])
    (raw,) = trajectories(tmp_path / "raw")
    assert raw.outcome.status == "completed" and summary.invalid_actions == 1
    assert raw.steps[1].action.kind == "teleport" and raw.steps[1].observation.data["invalid_action"]
    assert "typed" in raw.steps[2].observation.text.splitlines()[-2]

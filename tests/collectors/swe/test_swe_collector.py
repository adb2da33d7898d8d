"""`python -m collectors.swe` end to end on the embedded suite: real repositories from the SWE cache
($AGENTWORLD_CACHE_DIR/swe, filled by `python -m collectors.swe prepare`; built on first use), the
real SWE sandbox under bwrap, the explorer and the scripted fix."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from collectors.swe.explorer import SweExplorer
from collectors.tasks import embedded_tasks
from sandboxes.swe import SweSandbox, make_config
from sandboxes.swe.repos import default_cache_dir
from schemas import read_trajectories
from schemas.records import Task
from tests.collectors.conftest import play, run_main

ROOT = Path(__file__).resolve().parents[3]


def run_collector(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "collectors.swe", "--no-progress", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_help_has_examples() -> None:
    result = run_collector("--help")
    assert result.returncode == 0
    assert (
        "examples:" in result.stdout
        and "--sandboxes" in result.stdout
        and "prepare --all --check" in result.stdout
    )
    prepare = subprocess.run(
        [sys.executable, "-m", "collectors.swe", "prepare", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert prepare.returncode == 0 and "--write-tasks" in prepare.stdout and "examples:" in prepare.stdout


def test_embedded_suite_tasks_carry_their_fix() -> None:
    tasks = embedded_tasks("swe")
    assert len({t.task.metadata["repo"] for t in tasks}) >= 20
    for spec in tasks:
        meta = spec.task.metadata
        assert spec.id == f"{meta['repo']}-{meta['seed']}"
        kinds = [a["kind"] for a in spec.actions]
        assert kinds == ["bash", "edit", "bash"]
        edit = spec.actions[1]["arguments"]
        assert (
            edit["old_str"] == meta["mutation"]["mutated"] and edit["new_str"] == meta["mutation"]["original"]
        )


def test_explorer_on_embedded_defaults_writes_valid_trajectories_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "data"
    args = ["--sandboxes", "2", "--episodes", "3", "--max-steps", "10", "--out", str(out)]
    result = run_collector(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    found = list(read_trajectories(str(out), validate=True))
    assert sorted(t.task.metadata["slot"] for t in found) == [0, 1, 2]
    assert {t.domain for t in found} == {"swe"} and {t.policy.name for t in found} == {"explorer"}
    assert all(t.outcome.status in ("completed", "truncated") for t in found), [t.outcome for t in found]
    assert all([tool.name for tool in t.environment.tools] == ["read", "edit", "bash"] for t in found)
    steps = [s for t in found for s in t.steps]
    assert {s.action.kind for s in steps} <= {"read", "edit", "bash"} and len(steps) >= 6
    assert {s.observation.format for s in steps} == {"swe_tool_result"}
    test_runs = [s for s in steps if s.action.kind == "bash" and "pytest" in s.action.arguments["command"]]
    assert test_runs and any(s.observation.data["exit_status"] == 1 for s in test_runs)
    assert "trajectories written: 3" in result.stdout
    again = run_collector(*args)
    assert again.returncode == 0 and "skipped as already finished: 3" in again.stdout


def test_scripted_policy_fixes_every_task_it_plays(tmp_path: Path) -> None:
    out = tmp_path / "scripted"
    result = run_collector("--policy", "scripted", "--episodes", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    found = list(read_trajectories(str(out), validate=True))
    assert len(found) == 2
    for trajectory in found:
        first, edit, last = trajectory.steps
        assert first.observation.data["exit_status"] == 1, first.observation.text[-1500:]
        assert edit.action.kind == "edit" and edit.observation.data["error"] == ""
        assert last.observation.data["exit_status"] == 0, last.observation.text[-1500:]
        assert trajectory.outcome.status == "completed"


def test_task_of_an_unknown_repository_stops_before_the_fleet(tmp_path: Path, capsys) -> None:
    tasks = tmp_path / "tasks.jsonl"
    task = {"id": "nope-0", "metadata": {"repo": "no-such-project", "version": "1.0", "seed": 0}}
    tasks.write_text(json.dumps(task) + "\n")
    assert run_main("swe", "--tasks", str(tasks), "--episodes", "1", "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert "not in the embedded suite" in err and "test_command" in err


def _explore(task: Task, seed: int) -> list[str]:
    explorer = SweExplorer()
    with SweSandbox(make_config("auto", cache_dir=default_cache_dir())) as sandbox:
        return [action.text for action, _ in play(sandbox, explorer, task, random.Random(seed), 14)]


def test_explorer_is_reproducible_and_debugs_the_source() -> None:
    spec = next(s for s in embedded_tasks("swe") if s.id == "webcolors-0")
    first, again = _explore(spec.task, 3), _explore(spec.task, 3)
    assert first == again
    assert first[0].startswith("bash(command='env PYTHONPATH=src python3 -m pytest")
    edits = [text for text in first if text.startswith("edit(")]
    assert not [text for text in edits if "path='tests/" in text], edits  # never the tests
    assert any("path='src/" in text for text in first), first  # it found the package's source

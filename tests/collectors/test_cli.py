"""`python -m collectors.terminal` end to end, on real docker containers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.variety import explorer_variety
from tests.collectors.conftest import assert_exactly_once, containers, run_collector, run_main


def test_help_has_examples() -> None:
    result = run_collector("--help")
    assert result.returncode == 0
    assert "examples:" in result.stdout and "--replay-from" in result.stdout and "--backend" in result.stdout


@pytest.mark.docker
def test_fleet_of_4_writes_20_valid_trajectories(tmp_path: Path, terminal_image: str) -> None:
    out = tmp_path / "data"
    args = ["--sandboxes", "4", "--episodes", "20", "--max-steps", "4", "--memory", "301m", "--out", str(out)]
    result = run_collector(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    found = assert_exactly_once(out, 20)
    assert {t.environment.backend for t in found} == {"docker"}
    assert {t.policy.name for t in found} == {"explorer"}
    failed = [(t.task.id, t.outcome) for t in found if t.outcome.status not in ("completed", "truncated")]
    assert not failed, failed
    assert all(1 <= len(t.steps) <= 4 for t in found)
    # Real screens: the prompt of the image's agent user, and setup that built a workspace.
    assert all("agent@sandbox" in t.initial_observation.text for t in found)
    assert len({t.task.id for t in found}) == 20
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trajectories"] == 20 and summary["steps"] == sum(len(t.steps) for t in found)
    assert summary["reset_median_s"] > 0 and summary["exit_code"] == 0
    assert "trajectories written: 20" in result.stdout
    assert not containers("301m"), "the collector left containers behind"
    # A rerun finds everything finished and starts nothing.
    again = run_collector(*args)
    assert again.returncode == 0 and "skipped as already finished: 20" in again.stdout
    assert len(assert_exactly_once(out, 20)) == 20


@pytest.mark.docker
def test_unwritable_out_fails_before_any_sandbox(tmp_path: Path, terminal_image: str, capsys) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    # A missing image would also fail; the output check must come first, so no sandbox is tried.
    assert run_main("terminal", "--out", str(blocker / "out"), "--image", "agentworld/no-such-image:0") == 2
    err = capsys.readouterr().err
    assert "cannot write to" in err and str(blocker / "out") in err
    assert "no-such-image" not in err


@pytest.mark.docker
def test_missing_image_names_the_setup_command(tmp_path: Path, terminal_image: str, capsys) -> None:
    assert run_main("terminal", "--out", str(tmp_path / "out"), "--image", "agentworld/no-such-image:0") == 2
    err = capsys.readouterr().err
    assert "make setup" in err and "infra/terminal-image/build.sh" in err


@pytest.mark.docker
def test_explorer_variety_over_30_episodes(tmp_path: Path, terminal_image: str) -> None:
    out = tmp_path / "data"
    result = run_collector("--sandboxes", "4", "--episodes", "30", "--max-steps", "14", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    variety = explorer_variety(assert_exactly_once(out, 30))
    assert variety["distinct_programs"] >= 15, variety
    assert 0.05 <= variety["error_share"] <= 0.35, variety
    assert 0.05 <= variety["interactive_share"] <= 0.30, variety
    programs = variety["programs"]
    assert {"git", "grep", "python3"} <= set(programs), programs
    assert len({"vi", "less", "top", "bc", "nano", "cat"} & set(programs)) >= 3, programs


@pytest.mark.bwrap
def test_malformed_task_lines_are_reported_and_the_rest_run(tmp_path: Path, bwrap: None) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"id": "one", "actions": [{"command": "echo one"}]}\n'
        '{"id": "broken", "actions": "echo"}\n'
        '{"id": "two", "actions": [{"command": "echo two"}]}\n'
    )
    out = tmp_path / "data"
    args = ["--backend", "bwrap", "--policy", "scripted", "--tasks", str(tasks), "--episodes", "2"]
    result = run_collector(*args, "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{tasks}:2: 'actions' must be a list" in result.stderr
    found = assert_exactly_once(out, 2)
    assert sorted(t.task.id for t in found) == ["one", "two"]
    assert all(t.outcome.status == "completed" for t in found)

"""Crash safety on real containers: kill -9 and rerun, SIGTERM, a container killed mid-episode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from schemas import finished_ids
from tests.collectors.conftest import (
    assert_exactly_once,
    containers,
    run_collector,
    start_collector,
    trajectories,
    write_tasks,
)

pytestmark = pytest.mark.docker


def sleepy_tasks(path: Path, count: int, sleep: str, steps: int) -> Path:
    actions = [{"command": f"sleep {sleep}"} for _ in range(steps)] + [{"command": "echo finished"}]
    tasks = [
        {"id": f"sleepy-{i}", "setup": [f"echo task {i} > task.txt"], "actions": actions}
        for i in range(count)
    ]
    return write_tasks(path, tasks)


@pytest.mark.serial  # reaps the dead run's containers: a collector on another worker raced it once
def test_kill_9_then_rerun_records_every_slot_exactly_once(tmp_path: Path, orphan_containers: str) -> None:
    out = tmp_path / "data"
    tasks = sleepy_tasks(tmp_path / "tasks.jsonl", 4, "0.2", 2)
    args = [
        "--tasks",
        str(tasks),
        "--policy",
        "scripted",
        "--sandboxes",
        "2",
        "--episodes",
        "14",
        "--out",
        str(out),
    ]
    args += ["--shard-rows", "2", "--flush-interval", "0.2", "--memory", orphan_containers]
    process = start_collector(*args)
    deadline = time.monotonic() + 60
    while len(finished_ids(str(out))) < 4 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.kill()  # SIGKILL: no handler runs, whatever was in flight is lost
    process.wait()
    committed = finished_ids(str(out))
    assert 4 <= len(committed) < 14, "the kill must land mid-run"
    # Its sandboxes' watchdogs are removing its containers now (tests/collectors/test_orphans.py);
    # whatever they miss, the rerun's reaper removes.
    orphans = containers(orphan_containers)
    rerun = run_collector(*args)
    assert not orphans & containers(orphan_containers), "the dead run's containers are gone"
    tmux_dir = Path(f"/tmp/tmux-{os.getuid()}")
    assert not list(tmux_dir.glob(f"agentworld-{process.pid}-*")), "and its tmux servers"
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"skipped as already finished: {len(committed)}" in rerun.stdout
    found = assert_exactly_once(out, 14)
    assert {t.outcome.status for t in found} == {"completed"}
    assert all(t.steps[-1].observation.text.splitlines()[-2] == "finished" for t in found)


def test_sigterm_stops_cleanly_and_keeps_aborted_episodes(tmp_path: Path, terminal_image: str) -> None:
    out = tmp_path / "data"
    tasks = sleepy_tasks(tmp_path / "tasks.jsonl", 3, "0.8", 6)
    args = ["--tasks", str(tasks), "--policy", "scripted", "--sandboxes", "2", "--episodes", "6",
            "--memory", "281m", "--out", str(out)]  # fmt: skip
    process = start_collector(*args)
    # both workers are inside their first 5-second episode once each has its tmux server
    tmux_dir = Path(f"/tmp/tmux-{os.getuid()}")
    deadline = time.monotonic() + 60
    while len(list(tmux_dir.glob(f"agentworld-{process.pid}-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.5)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 143, stderr[-3000:]
    assert "SIGTERM" in stderr and "interrupted by SIGTERM" in stdout
    found = trajectories(out)
    assert len(found) == 2 and {t.outcome.status for t in found} == {"aborted"}
    assert all(0 < len(t.steps) < 7 and "SIGTERM" in t.outcome.error for t in found)
    assert not list(out.rglob(".tmp-*"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted_by"] == "SIGTERM" and summary["pending"] == 4 and summary["exit_code"] == 143
    assert not containers("281m"), "containers survived a SIGTERM"
    # The rerun records the 4 slots never started and keeps the aborted ones: each slot once.
    rerun = run_collector(*args)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    statuses = sorted(t.outcome.status for t in assert_exactly_once(out, 6))
    assert statuses == ["aborted"] * 2 + ["completed"] * 4


def _container_running(marker: str, memory: str) -> str | None:
    for container in containers(memory):
        top = subprocess.run(["docker", "top", container], capture_output=True, text=True)
        if marker in top.stdout:
            return container
    return None


def test_container_killed_mid_episode_is_an_error_and_the_fleet_goes_on(
    tmp_path: Path, terminal_image: str
) -> None:
    out = tmp_path / "data"
    marker = "sleep 4.321"
    tasks = write_tasks(
        tmp_path / "tasks.jsonl",
        [
            {
                "id": "victim",
                "actions": [{"command": "echo start"}, {"command": marker}, {"command": "echo never"}],
            },
            {"id": "next-1", "actions": [{"command": "echo one"}]},
            {"id": "next-2", "actions": [{"command": "echo two"}]},
        ],
    )
    args = [
        "--tasks",
        str(tasks),
        "--policy",
        "scripted",
        "--episodes",
        "3",
        "--memory",
        "277m",
        "--out",
        str(out),
    ]
    process = start_collector(*args)
    deadline = time.monotonic() + 60
    while (victim := _container_running(marker, "277m")) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert victim is not None, "the episode never reached its sleep"
    subprocess.run(["docker", "kill", victim], capture_output=True, check=True)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr[-3000:]
    by_task = {t.task.id: t for t in assert_exactly_once(out, 3)}
    crashed = by_task["victim"]
    assert crashed.outcome.status == "error" and crashed.outcome.error_kind == "sandbox_crashed"
    assert "container" in crashed.outcome.error, crashed.outcome.error
    assert [s.action.text for s in crashed.steps] == ["echo start"]
    for name, word in (("next-1", "one"), ("next-2", "two")):
        assert by_task[name].outcome.status == "completed"
        assert by_task[name].steps[0].observation.text.splitlines()[-2] == word
    assert "sandboxes replaced: 1" in stdout

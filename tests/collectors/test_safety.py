"""Collector safety on real bwrap shells: one run per --out, every task once, failing policies,
sandboxes replaced after errors."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from collectors.cli import Plan, main_guard, parse_args, run_cli
from collectors.policies.base import Policy
from collectors.runner import FleetConfig, run_fleet
from collectors.tasks import TaskSpec
from collectors.terminal.__main__ import SPEC
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from schemas.lock import DatasetLock
from schemas.records import Action, Observation, Task
from tests.collectors.conftest import (
    assert_exactly_once,
    run_collector,
    start_collector,
    trajectories,
    write_tasks,
)

pytestmark = pytest.mark.bwrap


def _sandbox_factory(made: list[TerminalSandbox] | None = None):
    config = TerminalConfig(backend=make_backend("bwrap"), command_timeout=5.0)

    def make() -> TerminalSandbox:
        sandbox = TerminalSandbox(config)
        if made is not None:
            made.append(sandbox)
        return sandbox

    return make


def _fleet(out: Path, policy_factory, specs: list[TaskSpec], episodes: int, **kw) -> FleetConfig:
    return FleetConfig(
        domain="terminal",
        sandbox_factory=kw.pop("sandbox_factory", _sandbox_factory()),
        policy_factory=policy_factory,
        tasks=specs,
        out=str(out),
        episodes=episodes,
        progress=False,
        handle_signals=False,
        **kw,
    )


def test_second_collector_on_the_same_out_is_refused(tmp_path: Path, bwrap: None) -> None:
    out = tmp_path / "data"
    slow = [{"command": "sleep 0.5"}] * 4
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": f"slow-{i}", "actions": slow} for i in range(3)])
    args = ["--backend", "bwrap", "--policy", "scripted", "--tasks", str(tasks), "--out", str(out)]
    first = start_collector(*args, "--shard-rows", "1")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and first.poll() is None:
        holder = (out / ".lock").read_text() if (out / ".lock").exists() else ""
        if f'"pid": {first.pid}' in holder:
            break
        time.sleep(0.05)
    second = run_collector(*args, timeout=60)
    assert first.poll() is None, "the first run must still be going when the second one starts"
    assert second.returncode == 2, second.stderr[-3000:]
    assert f"in use by another collector (pid {first.pid} on host" in second.stderr
    assert "choose another --out" in second.stderr and "Traceback" not in second.stderr
    stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr[-3000:]
    assert "trajectories written: 3" in stdout
    assert {t.outcome.status for t in assert_exactly_once(out, 3)} == {"completed"}


def test_a_task_file_runs_each_task_once_by_default(tmp_path: Path, bwrap: None) -> None:
    specs = [{"id": f"task-{i:02d}", "actions": [{"command": f"echo {i}"}]} for i in range(12)]
    tasks = write_tasks(tmp_path / "tasks.jsonl", specs)
    out = tmp_path / "data"
    result = run_collector(
        "--backend", "bwrap", "--policy", "scripted", "--sandboxes", "2", "--tasks", str(tasks),
        "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "trajectories written: 12" in result.stdout
    found = assert_exactly_once(out, 12)
    assert sorted(t.task.id for t in found) == [s["id"] for s in specs]


def test_a_policy_that_cannot_be_built_stops_the_run_with_the_reason(tmp_path: Path, bwrap: None) -> None:
    def broken() -> Policy:
        raise RuntimeError("model weights not found at /models/x")

    specs = [TaskSpec(Task(id="t"))]
    summary = run_fleet(_fleet(tmp_path / "data", broken, specs, episodes=3, sandboxes=2))
    assert summary.exit_code == 1 and summary.trajectories == 0
    assert summary.fatal and "model weights not found at /models/x" in summary.fatal
    saved = json.loads((tmp_path / "data" / "summary.json").read_text())
    assert saved["exit_code"] == 1 and "model weights" in saved["fatal"]
    # The CLI builds one policy before any sandbox starts and exits 2 with the same reason.
    args = parse_args(SPEC, ["--backend", "bwrap", "--out", str(tmp_path / "cli")])
    with DatasetLock(args.out) as lock:
        code = main_guard(lambda: run_cli(Plan(args, specs, 3), "terminal", _sandbox_factory(), broken, lock))
    assert code == 2


class _FailsOnce(Policy):
    """Dirties its first episode's sandbox, then raises in the middle of it."""

    name = "fails-once"

    def __init__(self) -> None:
        self.episodes = 0
        self.steps = 0

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        self.episodes += 1
        self.steps = 0

    def act(self, observation: Observation) -> Action | None:
        self.steps += 1
        if self.episodes == 1 and self.steps == 2:
            raise RuntimeError("policy bug")
        return command_action("sleep 1 &") if self.steps == 1 else None


def test_sandbox_is_replaced_after_an_error(tmp_path: Path, bwrap: None) -> None:
    made: list[TerminalSandbox] = []
    specs = [TaskSpec(Task(id=f"t{i}")) for i in range(3)]
    config = _fleet(tmp_path / "data", _FailsOnce, specs, episodes=3, sandbox_factory=_sandbox_factory(made))
    summary = run_fleet(config)
    assert summary.exit_code == 0
    assert summary.outcomes == {"error": 1, "completed": 2}
    assert summary.sandbox_replacements == 1 and len(made) == 2
    (failed,) = [t for t in trajectories(tmp_path / "data") if t.outcome.status == "error"]
    assert failed.outcome.error_kind == "policy_error" and "policy bug" in failed.outcome.error

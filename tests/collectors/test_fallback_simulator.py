"""--fallback-simulator: a real terminal sandbox (bubblewrap) whose shell is killed by the task's own
action (`kill -9 $$`) mid-episode; the episode goes on on llama.cpp's SmolLM2, marked turn by turn.
Without the flag the same episode ends in the old error outcome."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from beam_pipelines.stages.filter import rejection
from collectors.policies import make_policy
from collectors.runner import FleetConfig, run_fleet
from collectors.tasks import TaskSpec
from sandboxes.base import SandboxError
from sandboxes.plugins import simulator_factory
from sandboxes.terminal import TerminalConfig, TerminalSandbox, make_backend, parse_action
from schemas import read_trajectories
from schemas.records import Observation, Step, Task
from tests.collectors.conftest import run_collector, write_tasks
from tests.llm_server import LLMServer

KILL = "kill -9 $$"  # the shell kills itself: the sandbox sees its shell exit, a SandboxCrashedError
VICTIM = {
    "id": "victim",
    "actions": [{"command": "echo start"}, {"command": KILL}, {"command": "echo after"}],
    "verifier": {"kind": "command", "checks": ["test -f done.txt"]},
}
CALM = {"id": "calm", "actions": [{"command": "echo calm"}]}


def by_task(out: Path) -> dict:
    return {t.task.id: t for t in read_trajectories(str(out), validate=True)}


def test_a_crash_mid_episode_goes_on_on_the_simulator_marked_turn_by_turn(
    tmp_path: Path, llm_server: LLMServer, bwrap: None
) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [VICTIM, CALM])
    out = tmp_path / "data"
    done = run_collector(
        "--backend", "bwrap", "--tasks", str(tasks), "--policy", "scripted", "--episodes", "2",
        "--fallback-simulator", llm_server.base_url, "--model-max-tokens", "4", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "fell back to the simulator: 1 episode(s)" in done.stdout
    assert "errors by kind: none" in done.stdout
    found = by_task(out)
    victim = found["victim"]
    assert [s.action.text for s in victim.steps] == ["echo start", KILL, "echo after"]
    real, simulated = victim.steps[:1], victim.steps[1:]
    assert "start" in real[0].observation.text.splitlines()[-2]
    assert "simulated" not in real[0].info and "simulated" not in real[0].observation.data
    for step in simulated:  # the failed action is retried on the simulator, then the policy goes on
        assert step.info["simulated"] is True and step.observation.data["simulated"] is True
    fallback = victim.environment.config["fallback"]
    assert fallback["model"] == llm_server.model and fallback["endpoint"] == llm_server.base_url
    assert fallback["from_step"] == 1
    assert (
        fallback["reason"].startswith("step 1 failed: SandboxCrashedError") and "shell" in fallback["reason"]
    )
    # the real sandbox stays what it was; the trajectory is marked as (partly) simulated
    assert victim.environment.backend == "bwrap" and victim.provenance.simulated is True
    assert victim.outcome.status == "completed" and not victim.outcome.error_kind
    # the reward is the simulator's verdict, named as such, never the real verifier's
    assert victim.outcome.verification is not None
    assert victim.outcome.verification.verifier == "simulated:command"
    # the corpus pipeline's filter keeps simulated turns out of training data
    assert rejection(victim, 512, 10**6) == ("simulated", "fell back to the simulator from step 1")
    calm = found["calm"]
    assert "fallback" not in calm.environment.config and calm.provenance.simulated is False
    assert calm.outcome.status == "completed" and calm.steps[0].info.get("simulated") is None


def test_without_the_flag_the_crash_is_the_old_error_outcome(tmp_path: Path, bwrap: None) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [VICTIM])
    out = tmp_path / "data"
    done = run_collector(
        "--backend", "bwrap", "--tasks", str(tasks), "--policy", "scripted", "--episodes", "1",
        "--out", str(out),
    )  # fmt: skip
    # Its one episode ended in an error: like every collector's run with nothing usable, exit 1.
    assert done.returncode == 1, done.stderr[-3000:]
    assert "every episode ended in an error (1)" in done.stderr
    assert "fell back" not in done.stdout
    victim = by_task(out)["victim"]
    assert victim.outcome.status == "error" and victim.outcome.error_kind == "sandbox_crashed"
    assert victim.outcome.error.startswith("step 1 failed: SandboxCrashedError")
    assert [s.action.text for s in victim.steps] == ["echo start"]
    assert "fallback" not in victim.environment.config and victim.provenance.simulated is False


def _bwrap_sandbox() -> TerminalSandbox:
    return TerminalSandbox(TerminalConfig(backend=make_backend("bwrap")))


def test_a_sandbox_that_cannot_take_over_leaves_the_error_outcome(tmp_path: Path, bwrap: None) -> None:
    """A real sandbox as the 'fallback' refuses resume: the episode ends as without a fallback, the
    reason said in the error, no fallback recorded."""
    spec = TaskSpec(task=Task(id="victim"), actions=VICTIM["actions"])
    config = FleetConfig(
        domain="terminal", sandbox_factory=_bwrap_sandbox,
        policy_factory=lambda: make_policy("scripted", tasks=[spec], parse_action=parse_action),
        tasks=[spec], out=str(tmp_path / "data"), episodes=1, progress=False, handle_signals=False,
        fallback=_bwrap_sandbox, fallback_record={"model": "none", "endpoint": "none"},
    )  # fmt: skip
    summary = run_fleet(config)
    assert summary.fallbacks == 0 and summary.outcomes == {"error": 1}
    (victim,) = read_trajectories(str(tmp_path / "data"), validate=True)
    assert victim.outcome.error_kind == "sandbox_crashed"
    assert "the fallback simulator could not take over" in victim.outcome.error
    assert "cannot take over an episode" in victim.outcome.error
    assert [s.action.text for s in victim.steps] == ["echo start"]
    assert "fallback" not in victim.environment.config and victim.provenance.simulated is False


def test_the_simulator_is_asked_with_the_real_history(llm_server: LLMServer) -> None:
    """SimulatedSandbox.resume: the next prediction continues the real steps (its index, its prompt)."""
    sandbox = simulator_factory("terminal", llm_server.base_url, model=llm_server.model, max_new_tokens=4)()
    task = Task(id="t", instruction="print a word")
    initial = Observation(format="terminal_screen", text="agent@sandbox:~$")
    echo = parse_action("command", {"command": "echo marker-from-the-real-shell"})
    real = Observation(format="terminal_screen", text="agent@sandbox:~$ echo x\nmarker-from-the-real-shell\n")
    step = Step(index=0, action=echo, observation=real, started_at=datetime.now(UTC), latency_s=0.1)
    sandbox.resume(task, initial, [step])
    seen: list[list[dict]] = []
    complete = sandbox.backend.complete
    sandbox.backend.complete = lambda messages, config: seen.append(messages) or complete(messages, config)
    result = sandbox.step(parse_action("command", {"command": "pwd"}))
    assert result.info["simulated"] is True
    prompt = "\n".join(str(m["content"]) for m in seen[0])
    assert "marker-from-the-real-shell" in prompt and "pwd" in prompt
    assert len(sandbox._episode.steps) == 2 and sandbox._episode.steps[1].index == 1
    with pytest.raises(SandboxError, match="cannot take over an episode"):
        _bwrap_sandbox().resume(task, initial, [])

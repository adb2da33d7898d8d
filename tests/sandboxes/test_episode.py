"""The one episode loop on real bwrap terminals: the fleet runner, the OpenEnv environment and the
Gymnasium wrapper record the same steps and outcome for the same actions (valid, malformed, past the
step limit, a verifier that raises), and `Episode` itself: bounds, invalid actions, latency,
timeouts, failures, the verifier and a hand-over."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.policies.scripted import ScriptedPolicy
from collectors.runner import FleetConfig, run_fleet
from sandboxes.base import Sandbox, SandboxError
from sandboxes.checks import resource_exists
from sandboxes.episode import TIMEOUT, Episode, EpisodeOverError
from sandboxes.serve.environment import SandboxEnvironment
from sandboxes.serve.gym_env import SandboxGymEnv
from sandboxes.serve.models import SandboxAction
from sandboxes.tasks import TaskSpec
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend, parse_action
from schemas import read_trajectories
from schemas.invalid_actions import INVALID, invalid_action
from schemas.records import Action, Outcome, Step, Task

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]

EXPLODE = "explode"  # a verifier kind whose check fails with a plain exception, not a SandboxError
# Valid, refused by the parser (unknown kind), valid, refused (bad argument): the fourth is the task's
# step limit, so the fifth is never taken by anyone.
ACTIONS: list[dict[str, Any]] = [
    {"kind": "command", "arguments": {"command": "echo hi > f"}},
    {"kind": "teleport", "arguments": {}},
    {"kind": "command", "arguments": {"command": "cat f"}},
    {"kind": "command", "arguments": {"command": 5}},
    {"kind": "command", "arguments": {"command": "echo past the limit"}},
]
TASK = Task(id="three-ways", instruction="write hi to f", max_steps=4, verifier={"kind": EXPLODE})


class ExplodingVerifierSandbox(TerminalSandbox):
    """A real bwrap terminal whose `explode` verifier fails the way a buggy check would."""

    def verify(self, task: Task, steps: list[Step]):
        if task.verifier.get("kind") == EXPLODE:
            raise KeyError("the check's expected file is gone")
        return super().verify(task, steps)


class ReplayingSandbox(TerminalSandbox):
    """A real terminal that can take over an episode: it replays the steps another sandbox took."""

    def resume(self, task: Task, initial_observation, steps) -> None:
        self.reset(task)
        for step in steps:
            if step.action.kind != INVALID:
                self.step(step.action)


@pytest.fixture
def made() -> Iterator[list[Sandbox]]:
    if shutil.which("bwrap") is None or shutil.which("tmux") is None:
        pytest.fail("bwrap and tmux are needed (apt-get install bubblewrap tmux)")
    sandboxes: list[Sandbox] = []
    yield sandboxes
    for sandbox in sandboxes:
        sandbox.close()
    leaked = sorted(r for s in sandboxes for r in s.resources() if resource_exists(r))
    assert not leaked, f"resources survived close(): {leaked}"


def factory_of(
    made: list[Sandbox], cls: type[TerminalSandbox] = ExplodingVerifierSandbox
) -> Callable[[], Sandbox]:
    def factory() -> Sandbox:
        sandbox = cls(TerminalConfig(backend=make_backend("bwrap")))
        made.append(sandbox)
        return sandbox

    return factory


def started(made: list[Sandbox], cls: type[TerminalSandbox] = TerminalSandbox) -> Sandbox:
    sandbox = factory_of(made, cls)()
    sandbox.start()
    return sandbox


def comparable(steps: list[Step]) -> list[tuple]:
    """What must agree across callers (timestamps and latencies are each run's own)."""
    return [
        (s.index, s.action.kind, s.action.arguments, s.action.text, s.observation.format, s.observation.text)
        + (s.observation.data.get("error"), s.reward, s.done, s.info)
        for s in steps
    ]


def by_runner(made: list[Sandbox], tmp_path: Path) -> tuple[list[Step], Outcome]:
    spec = TaskSpec(TASK, [dict(a) for a in ACTIONS])
    config = FleetConfig(
        domain="terminal", sandbox_factory=factory_of(made), tasks=[spec], out=str(tmp_path / "data"),
        policy_factory=lambda: ScriptedPolicy([spec], parse_action),
        max_steps=20, progress=False, handle_signals=False,
    )  # fmt: skip
    assert run_fleet(config).exit_code == 0
    (trajectory,) = list(read_trajectories(tmp_path / "data"))
    return trajectory.steps, trajectory.outcome


def by_openenv(made: list[Sandbox]) -> tuple[list[Step], Outcome]:
    env = SandboxEnvironment(factory_of(made), [TASK], domain="terminal", max_steps=20)
    try:
        env.reset(task_id=TASK.id)
        answers = []
        for action in ACTIONS[:4]:
            answers.append(env.step(SandboxAction(kind=action["kind"], arguments=action["arguments"])))
        assert [bool(a.error) for a in answers] == [False, True, False, True]
        last = answers[-1]
        assert last.done and last.truncated and last.reward is None
        assert last.verification is not None and "KeyError" in last.verification["error"]
        assert env.state.step_count == 4 and env.state.done
        with pytest.raises(RuntimeError, match="send reset"):
            env.step(SandboxAction(**ACTIONS[4]))
        assert env.episode is not None and env.episode.outcome is not None
        return env.episode.steps, env.episode.outcome
    finally:
        env.close()


def by_gymnasium(made: list[Sandbox]) -> tuple[list[Step], Outcome]:
    env = SandboxGymEnv("terminal", sandbox_factory=factory_of(made), tasks=[TASK])
    try:
        env.reset(options={"task_id": TASK.id})
        ends = [env.step(json.dumps(action))[1:4] for action in ACTIONS[:4]]
        assert ends == [(0.0, False, False)] * 3 + [(0.0, False, True)]
        with pytest.raises(RuntimeError, match="send reset"):
            env.step(json.dumps(ACTIONS[4]))
        assert env.episode is not None and env.episode.outcome is not None
        return env.episode.steps, env.episode.outcome
    finally:
        env.close()


def test_runner_openenv_and_gymnasium_record_the_same_episode(made: list[Sandbox], tmp_path: Path) -> None:
    runs = {
        "runner": by_runner(made, tmp_path),
        "openenv": by_openenv(made),
        "gymnasium": by_gymnasium(made),
    }
    steps, outcome = runs["runner"]
    # Malformed actions are steps (recorded, counted toward the limit); the fifth action is past it.
    assert [s.action.kind for s in steps] == ["command", INVALID, "command", INVALID]
    assert steps[1].observation.text.startswith("invalid action: unknown terminal action kind 'teleport'")
    assert "hi" in steps[2].observation.text
    assert all(s.latency_s >= 0 for s in steps) and steps[0].latency_s > 0
    # The verifier raised a plain exception: the reward is unknown (None), the error is kept.
    assert (outcome.status, outcome.reward) == ("truncated", None)
    assert outcome.verification is not None and outcome.verification.verifier == EXPLODE
    assert outcome.verification.error.startswith("KeyError")
    for name in ("openenv", "gymnasium"):
        other_steps, other_outcome = runs[name]
        assert comparable(other_steps) == comparable(steps), name
        assert (other_outcome.status, other_outcome.reward, other_outcome.error) == (
            outcome.status,
            outcome.reward,
            outcome.error,
        ), name
        assert other_outcome.verification is not None
        assert other_outcome.verification.error == outcome.verification.error, name
    assert all(not sandbox.alive for sandbox in made)


# -- Episode itself --------------------------------------------------------------------------------


def test_bounds_and_invalid_actions_count(made: list[Sandbox]) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Episode(started(made), Task(id="t"), 0)
    assert Episode(started(made), Task(id="t", max_steps=2), 5).max_steps == 2
    assert Episode(started(made), Task(id="t", max_steps=9), 5).max_steps == 5  # an upper bound
    episode = Episode(started(made), Task(id="t"), 3)
    assert "$" in episode.reset().text and episode.reset_s is not None
    first = episode.step(invalid_action("click it", "no JSON object in the reply"))
    assert first is not None and first.observation.text == "invalid action: no JSON object in the reply"
    refused = episode.step(Action("command", {"command": "echo a\necho b"}))  # the sandbox refuses it
    assert refused is not None and refused.observation.data["invalid_action"] is True
    assert not episode.over
    last = episode.step(command_action("echo ok"))
    assert last is not None and "ok" in last.observation.text and last.latency_s > 0
    assert episode.outcome == Outcome("truncated") and [s.index for s in episode.steps] == [0, 1, 2]
    with pytest.raises(EpisodeOverError):
        episode.step(command_action("echo more"))
    assert episode.verify() is None and episode.outcome.reward is None  # no verifier: no reward
    assert episode.healthy


def test_the_agent_ends_and_the_verifier_scores(made: list[Sandbox]) -> None:
    task = Task(id="t", verifier={"kind": "command", "checks": ["test -f done.txt"]})
    episode = Episode(started(made), task, 5)
    episode.reset()
    episode.step(command_action("touch done.txt"))
    episode.end()
    with pytest.raises(EpisodeOverError):
        episode.end()
    verification = episode.verify()
    assert verification is not None and verification.reward == 1.0 and verification.elapsed_s > 0
    assert episode.outcome is not None and episode.outcome.reward == 1.0
    assert episode.outcome.verification is verification


def test_a_step_past_its_timeout_closes_the_sandbox(made: list[Sandbox]) -> None:
    sandbox = started(made)
    episode = Episode(sandbox, Task(id="t"), 5)
    episode.reset()
    assert episode.step(command_action("echo quick"), timeout_s=30) is not None
    clock = time.monotonic()
    assert episode.step(command_action("sleep 30"), timeout_s=0.5) is None
    assert time.monotonic() - clock < 10
    assert episode.outcome is not None and episode.outcome.status == "error"
    assert episode.outcome.error_kind == TIMEOUT and "0.5 s" in episode.outcome.error
    assert not sandbox.alive and not episode.healthy and len(episode.steps) == 1
    with pytest.raises(EpisodeOverError):
        episode.verify()  # an error episode's end state is unknown: not verified


def test_a_crash_is_recorded_and_can_be_handed_over(made: list[Sandbox]) -> None:
    episode = Episode(started(made), Task(id="t"), 5)
    episode.reset()
    episode.step(command_action("echo one > f"))
    episode.step(command_action("kill -9 $$"))  # the shell dies under the sandbox
    assert episode.outcome is not None and episode.outcome.error_kind == "sandbox_crashed"
    assert episode.failure is not None and episode.failure.index == 1 and not episode.healthy
    recorded = len(episode.steps)
    with pytest.raises(SandboxError, match="cannot take over"):
        episode.hand_over(started(made), episode.task, {"simulated": True})
    assert len(episode.steps) == recorded and episode.failure is not None  # as it was
    taker = started(made, ReplayingSandbox)
    retried = episode.hand_over(taker, episode.task, {"simulated": True})
    assert retried.arguments["command"] == "kill -9 $$" and not episode.over
    assert len(episode.steps) == 1  # the crash's own step is gone: its action is retried instead
    step = episode.step(command_action("cat f"))
    assert step is not None and "one" in step.observation.text and step.info == {"simulated": True}
    assert episode.sandbox is taker


def test_a_reset_that_fails_raises_and_marks_the_sandbox(made: list[Sandbox]) -> None:
    sandbox = started(made)
    sandbox.close()
    episode = Episode(sandbox, Task(id="t"), 5)
    with pytest.raises(SandboxError):
        episode.reset()
    assert not episode.healthy and episode.initial is None

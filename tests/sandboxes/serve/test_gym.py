"""The Gymnasium wrapper on a real bwrap terminal: gymnasium's own checker, a scripted episode that
its command verifier scores 1, refused actions, the step limit, seeded task choice and close()."""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Iterator

import gymnasium
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

from sandboxes.base import Sandbox
from sandboxes.checks import resource_exists
from sandboxes.serve.gym_env import ENV_ID, AnyText, SandboxGymEnv, parse_action_text
from sandboxes.serve.models import DONE
from sandboxes.serve.server import real_sandbox_factory
from sandboxes.tasks import embedded_tasks
from schemas.records import Task

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]
TASK_ID = "files-append"  # a command verifier: grep -qx 'water plants' notes/todo.txt, ...


@pytest.fixture(autouse=True)
def _tools() -> None:
    for tool in ("bwrap", "tmux"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (apt-get install {tool})")


@pytest.fixture
def made() -> Iterator[list[Sandbox]]:
    """The sandboxes a test's factory made; nothing they held may survive the env's close()."""
    sandboxes: list[Sandbox] = []
    yield sandboxes
    held = {r for sandbox in sandboxes for r in sandbox.resources()}
    leaked = sorted(r for r in held if resource_exists(r))
    assert not leaked, f"resources survived close(): {leaked}"


def recording_factory(made: list[Sandbox]):
    real = real_sandbox_factory("terminal", "bwrap")

    def factory() -> Sandbox:
        sandbox = real()
        made.append(sandbox)
        return sandbox

    return factory


def gymnasium_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "WARN:" in str(w.message)]  # gymnasium.logger's prefix


def test_gymnasium_check_env_passes_on_a_real_terminal(made: list[Sandbox]) -> None:
    # Through gymnasium.make, so the env has a spec: the checker then also compares seeded resets'
    # observations and closes a fresh env twice.
    env = gymnasium.make(ENV_ID, domain="terminal", sandbox_factory=recording_factory(made))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        assert gymnasium_warnings(caught) == []
        assert made, "the checker never reset a sandbox"
    finally:
        env.close()
    assert all(not sandbox.alive for sandbox in made)


def test_the_checker_catches_a_charset_real_screens_break(made: list[Sandbox]) -> None:
    # Why the spaces are AnyText: gymnasium's default Text charset has no space, '$' or '@', so the
    # very first screen of a shell is outside it, and check_env says so.
    env = SandboxGymEnv("terminal", sandbox_factory=recording_factory(made))
    env.observation_space = spaces.Text(4096)
    try:
        with pytest.raises(AssertionError, match="not within the observation space"):
            check_env(env)
    finally:
        env.close()
    screen = "agent@sandbox:~$ ls\nnotes  café  ✓"
    assert screen in AnyText(100) and screen not in spaces.Text(100)


def test_scripted_episode_scores_one_through_the_command_verifier(made: list[Sandbox]) -> None:
    spec = next(s for s in embedded_tasks("terminal") if s.id == TASK_ID)
    assert spec.task.verifier["kind"] == "command" and spec.actions
    env = SandboxGymEnv("terminal", sandbox_factory=recording_factory(made), tasks=[spec])
    try:
        obs, info = env.reset(seed=3)
        assert info["task_id"] == TASK_ID and info["instruction"] == spec.task.instruction
        assert obs in env.observation_space and "$" in obs
        rewards = []
        for action in spec.actions:  # the task file's kind-keyed form: {"command": "..."}
            obs, reward, terminated, truncated, info = env.step(json.dumps(action))
            assert (terminated, truncated, info["error"]) == (False, False, None)
            rewards.append(reward)
        assert "water plants" in obs  # the scripted `tail -2` shows the appended line
        obs, reward, terminated, truncated, info = env.step(json.dumps({"kind": DONE}))
        assert (reward, terminated, truncated) == (1.0, True, False)
        assert rewards == [0.0] * len(spec.actions)
        assert info["task_reward"] == 1.0 and info["verification"]["verifier"] == "command"
        with pytest.raises(RuntimeError, match="send reset"):
            env.step('{"command": "ls"}')
        # The same task, nothing done: only the untouched line's check passes, half the checks.
        env.reset(options={"task_id": TASK_ID})
        _, reward, terminated, _, info = env.step('{"done": true}')
        assert (reward, terminated, info["task_reward"]) == (0.5, True, 0.5)
    finally:
        env.close()


def test_refused_actions_leave_the_sandbox_unchanged_and_count_as_steps(made: list[Sandbox]) -> None:
    task = Task(id="free", instruction="anything", max_steps=8)  # no verifier
    env = SandboxGymEnv("terminal", sandbox_factory=recording_factory(made), tasks=[task])
    try:
        env.reset(seed=0)
        obs, *_ = env.step('{"kind": "command", "arguments": {"command": "echo one > f"}}')
        assert "invalid" not in obs
        for text in ("not json", "[1]", '{"kind": "teleport"}', '{"command": 5}', '{"done": false}', ""):
            obs, reward, terminated, truncated, info = env.step(text)
            assert obs.startswith("invalid action: ") and info["format"] == "error" and info["error"]
            assert (reward, terminated, truncated) == (0.0, False, False)
        # Each refusal counted: this is step 8, the limit. The sandbox is as the first step left it;
        # a task without a verifier gives reward 0.0 with task_reward None ("none", not a score of 0).
        obs, reward, terminated, truncated, info = env.step('{"action": "command", "command": "cat f"}')
        assert "one" in obs
        assert (reward, terminated, truncated, info["task_reward"]) == (0.0, False, True, None)
        assert env.episode is not None and len(env.episode.steps) == 8
    finally:
        env.close()


def test_malformed_text_alone_reaches_the_step_limit(made: list[Sandbox]) -> None:
    env = SandboxGymEnv(
        "terminal", sandbox_factory=recording_factory(made), tasks=[Task(id="t")], max_steps=3
    )
    try:
        env.reset(seed=0)
        ends = [env.step("not an action")[2:4] for _ in range(3)]
        assert ends == [(False, False), (False, False), (False, True)]
        with pytest.raises(RuntimeError, match="send reset"):
            env.step("not an action")
    finally:
        env.close()


def test_seeds_pick_tasks_deterministically_and_options_name_one(made: list[Sandbox]) -> None:
    tasks = [Task(id=f"t{i}") for i in range(8)]
    env = SandboxGymEnv("terminal", sandbox_factory=recording_factory(made), tasks=tasks)
    try:
        picked = [env.reset(seed=seed)[1]["task_id"] for seed in range(6)]
        assert picked == [env.reset(seed=seed)[1]["task_id"] for seed in range(6)]
        assert len(set(picked)) > 1
        env.reset(seed=11)
        after = [env.reset()[1]["task_id"] for _ in range(4)]
        env.reset(seed=11)
        assert after == [env.reset()[1]["task_id"] for _ in range(4)]
        assert env.reset(seed=11, options={"task_id": "t7"})[1]["task_id"] == "t7"
        with pytest.raises(ValueError, match="unknown task_id"):
            env.reset(options={"task_id": "nope"})
        assert len(made) == 1, "one sandbox serves every episode"
    finally:
        env.close()
        env.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


def test_action_text_forms() -> None:
    assert parse_action_text('{"kind": "command", "arguments": {"command": "ls"}}').arguments == {
        "command": "ls"
    }
    keyed = parse_action_text('{"command": "make", "timeout": 120}')
    assert (keyed.kind, keyed.arguments) == ("command", {"command": "make", "timeout": 120})
    generic = parse_action_text('{"action": "click", "element": 3}')
    assert (generic.kind, generic.arguments) == ("click", {"element": 3})
    assert parse_action_text('{"done": true}').kind == DONE
    for bad, why in [
        ("ls", "not JSON"),
        ("{}", "non-empty JSON object"),
        ('{"kind": "command", "extra": 1}', "only those keys"),
        ('{"kind": 3}', "non-empty string"),
        ('{"kind": "command", "arguments": []}', "must be an object"),
        ('{"done": true, "command": "ls"}', "exactly"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_action_text(bad)

"""A sandbox as a `gymnasium.Env` with text spaces, for in-process agents and RL libraries.

It steps a `SandboxEnvironment` (the adapter the OpenEnv server uses), whose episodes are the
`sandboxes.episode.Episode` the fleet runner steps too, so episodes are bounded, counted, verified
and rewarded exactly as the server and the runner do it. Only the text in and out is new here:

- An action is text: a JSON object `{"kind": "command", "arguments": {"command": "ls"}}`, the
  generic `{"action": "click", ...arguments}`, or a domain's kind-keyed form `{"command": "ls"}`
  (the first key names the kind and the whole object is its arguments, as the terminal shows it).
  `{"kind": "done"}` or `{"done": true}` ends the episode. Text that is not an action comes back as
  an observation showing the error (`info["error"]`); the sandbox is unchanged, and it counts as a
  step toward `max_steps` (an agent that only sends malformed text still reaches the limit).
- The observation is the sandbox's observation text; `info` has the task's instruction (on reset),
  the task id, the observation's format and structured `data`, and any error.
- The reward is 0.0 until the episode ends, then the task verifier's reward, or 0.0 when there is
  none: `info["task_reward"]` is then None (the task has no verifier, or it could not run; see
  `info["verification"]`). `terminated` is an episode the agent or the sandbox ended; `truncated` is
  the step limit or a failed step (a crashed sandbox; `info["error"]` says why).
- `reset(seed=)` picks the task from `self.np_random`, so a seed fixes the task (and every later
  seedless reset); `options={"task_id": ...}` names one.

    env = gymnasium.make("agentworld/Sandbox-v0", domain="terminal")   # bwrap, embedded tasks
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step('{"command": "ls"}')
"""

from __future__ import annotations

import copy
import json
import string
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
from gymnasium import spaces

from sandboxes.base import Sandbox
from sandboxes.episode import Episode
from sandboxes.serve.environment import SandboxEnvironment
from sandboxes.serve.models import DONE, SandboxAction, SandboxObservation
from sandboxes.serve.server import real_sandbox_factory
from sandboxes.tasks import TaskSpec, embedded_tasks
from schemas.invalid_actions import INVALID
from schemas.records import Task

ENV_ID = "agentworld/Sandbox-v0"
MAX_OBSERVATION_CHARS = 1_000_000
MAX_ACTION_CHARS = 100_000


class AnyText(spaces.Text):
    """Any Unicode string of `min_length` to `max_length` characters.

    Real screens hold any character, and gymnasium's `Text` only contains strings of its charset
    (a charset of all of Unicode would be a million-entry set). Samples are drawn from printable
    ASCII; membership takes any character. `flatten` works only on strings of that sampling set.
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, AnyText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )


def parse_action_text(text: str) -> SandboxAction:
    """An action's text -> SandboxAction; ValueError with the reason when it is not one."""
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"an action is one JSON object; this is not JSON ({exc})") from None
    if not isinstance(obj, dict) or not obj:
        raise ValueError(f"an action is a non-empty JSON object, got {type(obj).__name__} {text[:80]!r}")
    if "kind" in obj:
        extra = sorted(set(obj) - {"kind", "arguments"})
        kind, arguments = obj["kind"], obj.get("arguments", {})
        if extra:
            raise ValueError(f"a {{kind, arguments}} action has only those keys, not {extra}")
    elif "action" in obj:
        kind, arguments = obj["action"], {k: v for k, v in obj.items() if k != "action"}
    elif DONE in obj:
        if obj != {DONE: True}:
            raise ValueError('end the episode with exactly {"done": true}')
        kind, arguments = DONE, {}
    else:  # kind-keyed: {"command": "ls", "timeout": 5} is the command kind with those arguments
        kind, arguments = next(iter(obj)), obj
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"the action kind must be a non-empty string, got {kind!r}")
    if not isinstance(arguments, dict):
        raise ValueError(f"the action arguments must be an object, got {type(arguments).__name__}")
    return SandboxAction(kind=kind, arguments=arguments)


class SandboxGymEnv(gymnasium.Env[str, str]):
    """A gymnasium environment over any sandbox factory and tasks (default: the domain's real
    sandbox and its embedded task suite). One sandbox at a time, made on the first reset."""

    metadata: dict[str, Any] = {"render_modes": []}  # the observation is already the text to show

    def __init__(
        self,
        domain: str = "terminal",
        *,
        sandbox_factory: Callable[[], Sandbox] | None = None,
        tasks: Sequence[Task | TaskSpec] | None = None,
        backend: str | None = None,
        max_steps: int = 20,
        max_observation_chars: int = MAX_OBSERVATION_CHARS,
        max_action_chars: int = MAX_ACTION_CHARS,
    ) -> None:
        if sandbox_factory is not None and backend is not None:
            raise ValueError("pass either sandbox_factory or backend (which picks the default sandbox)")
        # The server's real sandboxes: never the host (a gym agent runs arbitrary commands).
        factory = sandbox_factory or real_sandbox_factory(domain, backend)
        given = embedded_tasks(domain) if tasks is None else tasks
        task_list = [t.task if isinstance(t, TaskSpec) else t for t in given]
        self._env = SandboxEnvironment(factory, task_list, domain=domain, max_steps=max_steps)
        self._task_ids = sorted(self._env.tasks)
        self.domain = domain
        self.observation_space = AnyText(max_observation_chars)
        self.action_space = AnyText(max_action_chars)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task_id = (options or {}).get("task_id")
        if task_id is None:
            task_id = self._task_ids[int(self.np_random.integers(len(self._task_ids)))]
        observation = self._env.reset(task_id=task_id)
        text, info = self._unpack(observation)
        info["instruction"] = observation.instruction
        return text, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        try:
            parsed = parse_action_text(action)
        except ValueError as exc:
            # Recorded and counted by the episode, never sent to the sandbox.
            parsed = SandboxAction(kind=INVALID, arguments={"raw": action, "error": str(exc)})
        observation = self._env.step(parsed)
        text, info = self._unpack(observation)
        crashed = bool(observation.metadata.get("crashed"))
        truncated = observation.done and (observation.truncated or crashed)
        terminated = observation.done and not truncated
        reward = 0.0
        if observation.done:
            info["task_reward"] = observation.reward
            info["verification"] = copy.deepcopy(observation.metadata.get("verification"))
            reward = float(observation.reward) if observation.reward is not None else 0.0
        return text, reward, terminated, truncated, info

    def close(self) -> None:
        self._env.close()  # idempotent: releases the sandbox
        super().close()

    @property
    def episode(self) -> Episode | None:
        """The current (or last) episode: its task, recorded steps and outcome."""
        return self._env.episode

    @property
    def task_ids(self) -> list[str]:
        return list(self._task_ids)

    def _unpack(self, observation: SandboxObservation) -> tuple[str, dict[str, Any]]:
        text = observation.text
        info: dict[str, Any] = {
            "task_id": self._env.state.task_id,
            "format": observation.format,
            "data": copy.deepcopy(observation.data),
            "error": observation.error,
        }
        limit = self.observation_space.max_length
        if len(text) > limit:
            info["observation_chars"] = len(text)  # cut to stay inside the observation space
            text = text[:limit]
        return text, info


gymnasium.register(id=ENV_ID, entry_point=SandboxGymEnv)

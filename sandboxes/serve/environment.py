"""One sandbox as an openenv-core `Environment`: the adapter the OpenEnv server and the Gymnasium
wrapper share. Each episode is a `sandboxes.episode.Episode`, the class the fleet runner steps too,
so bounds, invalid actions, latency, timeouts and the verifier behave as they do there.

- `reset(seed=, task_id=)` picks a task (by id, else by seed, else at random) and resets the sandbox.
- `step(action, timeout_s=)` validates the action with the domain's own parser. A malformed action
  (or one of kind `invalid`, text a client sent that is not an action) comes back as an observation
  showing the error the agent would see (`error`); the sandbox state is unchanged and it counts as a
  step. `{"kind": "done"}`, a sandbox that ends the episode (search's `answer`) or the step limit
  ends it: the task's verifier then runs in the same sandbox, and its reward is the last
  observation's `reward` (None when the task has none or the verifier could not run: unknown, not 0).
- A step that fails (the sandbox crashed, or outlasted `timeout_s` and was closed) ends the episode
  with the error and `metadata["crashed"]`; the next reset starts a fresh sandbox.

The sandbox is made lazily by `sandbox_factory` on the first reset, in the caller's thread: the
server runs each session in its own thread, and Playwright's sandboxes must stay in theirs.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from sandboxes.base import InvalidActionError, Sandbox
from sandboxes.domains import KNOWN_DOMAINS, domain_spec
from sandboxes.episode import Episode
from sandboxes.serve.models import DONE, SandboxAction, SandboxObservation, SandboxState
from schemas.invalid_actions import INVALID, invalid_action, invalid_action_error
from schemas.records import Action, Observation, Step, Task


class EpisodeStateError(RuntimeError):
    """A step before any reset, after the episode ended, or after the session was closed."""


class SandboxEnvironment(Environment[SandboxAction, SandboxObservation, SandboxState]):
    SUPPORTS_CONCURRENT_SESSIONS = True  # each session gets its own sandbox from the factory

    def __init__(
        self,
        sandbox_factory: Callable[[], Sandbox],
        tasks: Sequence[Task],
        *,
        domain: str,
        max_steps: int = 20,
    ) -> None:
        super().__init__()
        if not tasks:
            raise ValueError("a served sandbox needs at least one task")
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.domain = domain
        self.tasks = {task.id: task for task in tasks}
        self.max_steps = max_steps
        self._factory = sandbox_factory
        self._parse = domain_spec(domain).parse_action if domain in KNOWN_DOMAINS else None
        self._sandbox: Sandbox | None = None
        self._rng = random.Random()
        self._episode: Episode | None = None
        self._state = SandboxState(domain=domain, max_steps=max_steps)
        self._closed = False

    # -- the openenv contract --------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None, **_: Any
    ) -> SandboxObservation:
        self._check_open()
        task = self._pick(seed, task_id)
        sandbox = self._live_sandbox()
        episode = Episode(sandbox, task, self.max_steps)
        try:
            first = episode.reset()
        except Exception:
            self._discard_sandbox()  # a sandbox that cannot reset is not given to the next episode
            raise
        self._episode = episode
        described = sandbox.describe()
        self._state = SandboxState(
            episode_id=episode_id or uuid.uuid4().hex,
            step_count=0,
            domain=self.domain,
            task_id=task.id,
            simulated=described.backend == "simulator",
            environment={
                "name": described.name,
                "backend": described.backend,
                "image": described.image,
                "model": described.config.get("model"),
            },  # fmt: skip
            max_steps=episode.max_steps,
        )
        observation = _observation(first, instruction=task.instruction, metadata={"task_id": task.id})
        observation.task_id = task.id
        return observation

    def step(self, action: SandboxAction, timeout_s: float | None = None, **_: Any) -> SandboxObservation:
        self._check_open()
        episode = self._episode
        if episode is None or self._sandbox is None:
            raise EpisodeStateError("no episode: send reset before step")
        if self._state.done:
            raise EpisodeStateError("the episode is over: send reset to start the next one")
        if action.kind == DONE:
            episode.end()
            return self._finish(None)
        step = episode.step(self._action(action), timeout_s)
        self._state.step_count = len(episode.steps)
        if episode.failure is not None:
            self._discard_sandbox()
            self._state.done = True
            last = step.observation if step is not None else Observation(format="", text="")
            assert episode.outcome is not None
            return _observation(last, done=True, error=episode.outcome.error, metadata={"crashed": True})
        assert step is not None
        if episode.over:
            return self._finish(step)
        return _observation(step.observation, reward=step.reward, error=_refusal(step.observation))

    @property
    def episode(self) -> Episode | None:
        """The current (or last) episode: its task, recorded steps and outcome."""
        return self._episode

    @property
    def state(self) -> SandboxState:
        return self._state.model_copy()

    def get_metadata(self) -> EnvironmentMetadata:
        space = domain_spec(self.domain).action_space if self.domain in KNOWN_DOMAINS else ""
        return EnvironmentMetadata(
            name=f"agentworld-{self.domain}",
            description=f"The {self.domain} sandbox. Actions are {{kind, arguments}}; "
            f'{{"kind": "done"}} ends the episode.\n\n{space}',
            version="1",
        )

    def close(self) -> None:
        self._closed = True
        self._discard_sandbox()

    def interrupt(self) -> None:
        """End the session from another thread, a call perhaps still running in its own: close the
        sandbox, which the contract allows from any thread (it kills the sandbox's processes, so the
        running call fails soon). `close()` in the session's thread releases the rest afterwards."""
        self._closed = True
        sandbox = self._sandbox
        if sandbox is not None:
            sandbox.close()

    # -- internals -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise EpisodeStateError("this session was closed and its sandbox released; open a new session")

    def _pick(self, seed: int | None, task_id: str | None) -> Task:
        if task_id is not None:
            if task_id not in self.tasks:
                known = ", ".join(sorted(self.tasks)[:20])
                raise ValueError(f"unknown task_id {task_id!r}; this server has: {known}")
            return self.tasks[task_id]
        ids = sorted(self.tasks)
        rng = random.Random(seed) if seed is not None else self._rng
        return self.tasks[ids[rng.randrange(len(ids))]]

    def _action(self, action: SandboxAction) -> Action:
        """The contract's action: parsed by the domain's parser, or the invalid action that records
        why it could not be."""
        if action.kind == INVALID:
            return invalid_action(str(action.arguments.get("raw", "")), invalid_action_error(_plain(action)))
        if self._parse is None:
            return _plain(action)
        try:
            return self._parse(action.kind, action.arguments)
        except InvalidActionError as exc:
            raw = json.dumps({"kind": action.kind, "arguments": action.arguments}, sort_keys=True)
            return invalid_action(raw, str(exc))

    def _live_sandbox(self) -> Sandbox:
        if self._sandbox is not None and not self._sandbox.alive:
            self._discard_sandbox()
        if self._sandbox is None:
            sandbox = self._factory()
            try:
                sandbox.start()
            except BaseException:
                sandbox.close()
                raise
            self._sandbox = sandbox
        return self._sandbox

    def _discard_sandbox(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()

    def _finish(self, step: Step | None) -> SandboxObservation:
        """End the episode: run the task's verifier in this same sandbox, as the runner does."""
        episode = self._episode
        assert episode is not None and episode.outcome is not None
        self._state.done = True
        last = step.observation if step is not None else Observation(format="", text="")
        verification = episode.verify()
        self._state.reward = episode.outcome.reward
        metadata: dict[str, Any] = {"task_id": episode.task.id}
        if verification is not None:
            metadata["verification"] = dataclasses.asdict(verification)
        observation = _observation(
            last,
            reward=self._state.reward,
            done=True,
            truncated=episode.outcome.status == "truncated",
            error=_refusal(last),
            metadata=metadata,
        )
        observation.task_id, observation.verification = episode.task.id, metadata.get("verification")
        return observation


def _refusal(observation: Observation) -> str | None:
    """The error of an invalid action's observation (None for any other)."""
    return str(observation.data["error"]) if observation.data.get("invalid_action") else None


def _plain(action: SandboxAction) -> Action:
    return Action(
        kind=action.kind, arguments=dict(action.arguments), text=f"{action.kind} {action.arguments}"
    )


def _observation(
    observation: Observation,
    *,
    reward: float | None = None,
    done: bool = False,
    truncated: bool = False,
    instruction: str = "",
    error: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> SandboxObservation:
    return SandboxObservation(
        text=observation.text,
        format=observation.format,
        data=copy.deepcopy(observation.data),
        instruction=instruction,
        reward=reward,
        done=done,
        truncated=truncated,
        error=error,
        metadata=metadata or {},
    )

"""One sandbox as an openenv-core `Environment`: the adapter the OpenEnv server and the Gymnasium
wrapper share, so both step a sandbox the way the fleet runner does.

- `reset(seed=, task_id=)` picks a task (by id, else by seed, else at random) and resets the sandbox.
- `step` validates the action with the domain's own parser. A malformed action comes back as an
  observation showing the error the agent would see, and the sandbox state is unchanged, as in the
  runner. `{"kind": "done"}`, a sandbox that ends the episode (search's `answer`) or the step limit
  ends it: the task's verifier then runs in the same sandbox, and its reward is the last
  observation's `reward` (None when the task has none or the verifier could not run: unknown, not 0).
- A sandbox that crashes ends the episode with the error; the next reset starts a fresh one.

The sandbox is made lazily by `sandbox_factory` on the first reset, in the caller's thread: the
server runs each session in its own thread, and Playwright's sandboxes must stay in theirs.
"""

from __future__ import annotations

import copy
import dataclasses
import random
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from sandboxes.base import InvalidActionError, Sandbox, SandboxCrashedError, SandboxError, StepResult
from sandboxes.domains import KNOWN_DOMAINS, domain_spec
from sandboxes.serve.models import DONE, SandboxAction, SandboxObservation, SandboxState
from schemas.invalid_actions import invalid_action_observation
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
        self._task: Task | None = None
        self._steps: list[Step] = []
        self._state = SandboxState(domain=domain, max_steps=max_steps)
        self._closed = False

    # -- the openenv contract --------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None, **_: Any
    ) -> SandboxObservation:
        self._check_open()
        task = self._pick(seed, task_id)
        sandbox = self._live_sandbox()
        try:
            first = sandbox.reset(task)
        except SandboxError:
            self._discard_sandbox()  # a sandbox that cannot reset is not given to the next episode
            raise
        self._task, self._steps = task, []
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
            max_steps=self._limit(task),
        )
        observation = _observation(first, instruction=task.instruction, metadata={"task_id": task.id})
        observation.task_id = task.id
        return observation

    def step(self, action: SandboxAction, timeout_s: float | None = None, **_: Any) -> SandboxObservation:
        self._check_open()
        if self._task is None or self._sandbox is None:
            raise EpisodeStateError("no episode: send reset before step")
        if self._state.done:
            raise EpisodeStateError("the episode is over: send reset to start the next one")
        if action.kind == DONE:
            return self._finish(None, truncated=False)
        try:
            parsed = self._parse(action.kind, action.arguments) if self._parse else _plain(action)
            started, result = datetime.now(UTC), self._sandbox.step(parsed)
        except InvalidActionError as exc:
            # As the runner records it: the agent sees the error, the sandbox is unchanged, no step counted.
            return _observation(invalid_action_observation(str(exc)), error=str(exc))
        except SandboxCrashedError as exc:
            self._discard_sandbox()
            self._state.done = True
            return SandboxObservation(
                done=True, error=f"the sandbox crashed: {exc}", metadata={"crashed": True}
            )
        self._steps.append(
            Step(
                len(self._steps),
                parsed,
                result.observation,
                started,
                0.0,
                result.reward,
                result.done,
                result.info,
            )
        )
        self._state.step_count = len(self._steps)
        if result.done or len(self._steps) >= self._state.max_steps:
            return self._finish(result, truncated=not result.done)
        return _observation(result.observation, reward=result.reward)

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

    def _limit(self, task: Task) -> int:
        return min(task.max_steps, self.max_steps) if task.max_steps else self.max_steps

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

    def _finish(self, result: StepResult | None, *, truncated: bool) -> SandboxObservation:
        """End the episode: run the task's verifier in this same sandbox, as the runner does."""
        assert self._task is not None and self._sandbox is not None
        self._state.done = True
        last = result.observation if result is not None else Observation(format="", text="")
        metadata: dict[str, Any] = {"task_id": self._task.id}
        try:
            verification = self._sandbox.verify(self._task, self._steps)
        except SandboxError as exc:
            metadata["verification"] = {"error": f"{type(exc).__name__}: {exc}"}
            verification = None
        if verification is not None:
            self._state.reward = verification.reward
            metadata["verification"] = dataclasses.asdict(verification)
        observation = _observation(
            last, reward=self._state.reward, done=True, truncated=truncated, metadata=metadata
        )
        observation.task_id, observation.verification = self._task.id, metadata.get("verification")
        return observation


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

"""The sandbox contract: start, reset to a task, step an action, close.

A sandbox knows one kind of environment. It knows nothing of policies, files or fleets; where it
runs (docker, bwrap, local, ...) is a backend chosen by config.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.records import Action, Environment, Observation, Step, Task, Verification

# How much of a verifier's own output a trajectory keeps: its tail, where test summaries end.
VERIFIER_OUTPUT_CHARS = 8000


class SandboxError(RuntimeError):
    """Base class of every error a sandbox raises."""


class SandboxClosedError(SandboxError):
    """The sandbox was closed (or never started) and cannot step."""


class SandboxCrashedError(SandboxError):
    """The environment died under the sandbox (container killed, shell exited).

    `result`, when the sandbox gives one, is the step that failed with it (an observation saying
    what the agent saw, `info` with the evidence), so the runner records that step before the error.
    """

    def __init__(self, message: str = "", result: StepResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class VerifierError(SandboxError):
    """A task's verifier could not run (an unknown kind, a missing check); the reward is unknown."""


class InvalidActionError(SandboxError, ValueError):
    """The action is malformed for this domain; the sandbox state is unchanged."""


@dataclass
class StepResult:
    observation: Observation
    reward: float | None = None
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class Sandbox(ABC):
    domain: str = ""

    @abstractmethod
    def start(self) -> None:
        """Bring the environment up (idempotent)."""

    @abstractmethod
    def reset(self, task: Task) -> Observation:
        """Put the environment in the task's initial state and return the first observation."""

    @abstractmethod
    def step(self, action: Action) -> StepResult:
        """Apply one action. Raises InvalidActionError, SandboxClosedError, SandboxCrashedError."""

    @abstractmethod
    def close(self) -> None:
        """Release every process and container (idempotent)."""

    @property
    @abstractmethod
    def alive(self) -> bool:
        """True while started, not closed and the environment is still running."""

    @abstractmethod
    def describe(self) -> Environment:
        """Name, backend, image and config, recorded in each trajectory's `environment`."""

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        """Check the end state the episode left against `task.verifier`, in this same sandbox.

        Called once after the last step, before the next reset. None when the task has no verifier
        (`{}` or kind "none"). A domain overrides this for the kinds it knows and calls
        `super().verify` for the rest, which refuses them with a VerifierError.
        """
        kind = task.verifier.get("kind", "none") if task.verifier else "none"
        if kind == "none":
            return None
        name = self.domain or type(self).__name__
        raise VerifierError(f"the {name} sandbox has no verifier of kind {kind!r}")

    def resume(self, task: Task, initial_observation: Observation, steps: Sequence[Step]) -> None:
        """Take over an episode another sandbox began and could not finish: `task`, the observation
        its reset gave and the steps it took. The next `step` continues from the last of them.

        Only a sandbox without real state to rebuild (a world model) can do this; the default
        refuses with a SandboxError."""
        name = self.domain or type(self).__name__
        raise SandboxError(f"the {name} sandbox cannot take over an episode another sandbox began")

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

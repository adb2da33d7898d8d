"""One episode of a sandbox: the loop the fleet runner, the OpenEnv environment and the Gymnasium
wrapper all step through, so an episode is bounded, counted, timed and verified one way everywhere.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sandboxes.base import InvalidActionError, Sandbox, SandboxCrashedError, SandboxError, StepResult
from schemas.invalid_actions import INVALID, invalid_action_error, invalid_action_observation
from schemas.records import Action, Observation, Outcome, Step, Task, Verification
from schemas.verification_turns import (
    records_whole_turn,
    verification_turn,
    verifier_action,
    verifier_observation,
)

log = logging.getLogger(__name__)

TIMEOUT = "timeout"  # the error_kind of a step that outlasted its timeout_s


class EpisodeOverError(RuntimeError):
    """A step or an end after the episode has ended."""


class StepTimeoutError(SandboxError):
    """The step outlasted its `timeout_s`; its sandbox was closed to stop it."""


@dataclass
class Failure:
    """The step the sandbox raised on: what an error outcome or a hand-over needs of it."""

    exc: Exception
    action: Action
    index: int  # the failed step's index: the steps before it are the ones a sandbox really took


def error_kind(exc: BaseException) -> str:
    if isinstance(exc, StepTimeoutError):
        return TIMEOUT
    if isinstance(exc, SandboxCrashedError):
        return "sandbox_crashed"
    if isinstance(exc, SandboxError):
        return "sandbox_error"
    return f"exception:{type(exc).__name__}"


class Episode:
    """One task played in one sandbox, from reset to the verifier: the one behaviour of every caller.

    - **Bounds.** `max_steps` is an upper bound; the task's own `max_steps`, when positive, may lower
      it. The step that reaches it ends the episode `truncated`, unless the sandbox said done on that
      step (`completed`). `end()` is the agent's own end (`completed` unless told otherwise).
    - **Invalid actions count as steps.** An action of kind `INVALID` (a policy reply or client text
      that is not an action) never reaches the sandbox; an action the sandbox refuses
      (`InvalidActionError`) leaves it unchanged. Either is recorded as a step whose observation is
      `invalid_action_observation(error)` and counts toward the bound, so an agent that sends only
      malformed actions still reaches `max_steps`, and the recording shows what the agent saw.
    - **Latency.** Every step records `started_at` (UTC) and `latency_s`, the monotonic wall time of
      the sandbox's step (near zero for an action that never reached it).
    - **Timeouts.** `step(action, timeout_s=...)` closes the sandbox from a timer thread when the step
      outlasts `timeout_s` (the contract allows close from any thread, and it makes the running step
      fail soon): the episode ends `error` with error_kind `timeout`. Without one, each sandbox bounds
      its own waits.
    - **Failures.** Any exception from the sandbox's step ends the episode `error` (error_kind
      `timeout`, `sandbox_crashed`, `sandbox_error` or `exception:<type>`) and marks the sandbox
      unhealthy; a SandboxCrashedError's own result, when it has one, is recorded as the last step
      (what the agent saw). `failure` keeps the exception and action for `hand_over`.
    - **Verifier.** `verify()` runs the task's verifier once, in the same sandbox, after a completed
      or truncated episode. Any exception is caught: the reward stays None (unknown, not 0) with the
      error in `outcome.verification`; a crash there marks the sandbox unhealthy.
    - **Verification turns.** A verifier that decided (a reward) leaves its check in
      `verification.turns` (schemas.verification_turns), never in `steps`: a check-command verifier
      records its own (the terminal's real screens); any other kind is recorded here, as one turn
      asking the verifier as a whole and answered with its real output and reward.

    Reset errors are raised (the caller decides: the runner records an error episode, the server
    answers the request); the sandbox is then unhealthy.
    """

    def __init__(self, sandbox: Sandbox, task: Task, max_steps: int, *, info: dict[str, Any] | None = None):
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.sandbox = sandbox
        self.task = task
        self.max_steps = min(task.max_steps, max_steps) if task.max_steps > 0 else max_steps
        self.steps: list[Step] = []
        self.initial: Observation | None = None
        self.reset_s: float | None = None
        self.outcome: Outcome | None = None  # None while the episode runs
        self.failure: Failure | None = None
        self.healthy = True  # False once the sandbox failed a reset, a step or its verifier
        self._info = dict(info or {})  # added to every step's info (a hand-over marks its steps)

    @property
    def over(self) -> bool:
        return self.outcome is not None

    def reset(self) -> Observation:
        """Put the sandbox in the task's initial state; the first observation (also `initial`)."""
        clock = time.monotonic()
        try:
            self.initial = self.sandbox.reset(self.task)
        except Exception:
            self.healthy = False
            raise
        self.reset_s = time.monotonic() - clock
        return self.initial

    def step(self, action: Action, timeout_s: float | None = None) -> Step | None:
        """Take `action` and record it; the step, or None when the sandbox failed without one."""
        if self.over:
            raise EpisodeOverError("the episode is over: reset for the next one")
        started_at, clock = datetime.now(UTC), time.monotonic()
        try:
            result = self._apply(action, timeout_s)
        except Exception as exc:
            return self._fail(exc, action, started_at, time.monotonic() - clock)
        step = self._record(action, result, started_at, time.monotonic() - clock)
        if result.done:
            self.outcome = Outcome("completed")
        elif len(self.steps) >= self.max_steps:
            self.outcome = Outcome("truncated")
        return step

    def end(self, outcome: Outcome | None = None) -> None:
        """End the episode before the sandbox or the bound did: the agent is done (`completed`), or
        the caller's own reason (a policy error, a stop)."""
        if self.over:
            raise EpisodeOverError("the episode is over already")
        self.outcome = outcome or Outcome("completed")

    def verify(self) -> Verification | None:
        """Run the task's verifier on the end state, into `outcome`; None when the task has none."""
        if self.outcome is None or self.outcome.status not in ("completed", "truncated"):
            raise EpisodeOverError("only a completed or truncated episode is verified")
        started_at, clock = datetime.now(UTC), time.monotonic()
        try:
            verification = self.sandbox.verify(self.task, self.steps)
        except Exception as exc:
            self.healthy = self.healthy and not isinstance(exc, SandboxCrashedError)
            kind = str(self.task.verifier.get("kind", ""))
            verification = Verification(verifier=kind, error=f"{type(exc).__name__}: {exc}")
            log.warning("task %s: verifier %r could not run: %s", self.task.id, kind, exc)
        if verification is not None:
            verification.elapsed_s = time.monotonic() - clock
            if records_whole_turn(verification):
                verification.turns = [self._whole_verifier_turn(verification, started_at)]
            self.outcome.reward = verification.reward
            self.outcome.verification = verification
        return verification

    def hand_over(self, sandbox: Sandbox, task: Task, info: dict[str, Any]) -> Action:
        """Go on after a failed step in `sandbox` (a simulated one), given `task` and the steps the
        failed sandbox really took (`Sandbox.resume`); `info` marks every later step. Returns the
        failed action, to retry first. If the resume raises, the episode stays as it was."""
        if self.failure is None or self.initial is None:
            raise EpisodeOverError("only an episode whose step failed can be handed over")
        failure = self.failure
        sandbox.resume(task, self.initial, self.steps[: failure.index])
        del self.steps[failure.index :]  # the crash's own step: the action is retried instead
        self.sandbox, self.outcome, self.failure, self._info = sandbox, None, None, dict(info)
        return failure.action

    # -- internals -------------------------------------------------------------------------------

    def _whole_verifier_turn(self, verification: Verification, started_at: datetime) -> Step:
        action = verifier_action(self.task.verifier)
        observation = verifier_observation(verification)
        return verification_turn(len(self.steps), action, observation, started_at, verification.elapsed_s)

    def _apply(self, action: Action, timeout_s: float | None) -> StepResult:
        if action.kind == INVALID:
            return StepResult(invalid_action_observation(invalid_action_error(action)))
        with self._deadline(timeout_s):
            try:
                return self.sandbox.step(action)
            except InvalidActionError as exc:
                return StepResult(invalid_action_observation(str(exc)))

    @contextmanager
    def _deadline(self, timeout_s: float | None) -> Iterator[None]:
        """Close the sandbox if the body outlasts `timeout_s`, and then raise StepTimeoutError (also
        when the step returned just as the close ran: its sandbox is gone either way)."""
        if timeout_s is None:
            yield
            return
        timed_out = threading.Event()

        def time_out() -> None:
            timed_out.set()
            self.sandbox.close()

        timer = threading.Timer(timeout_s, time_out)
        timer.daemon = True
        timer.start()
        message = f"the step took over {timeout_s:g} s; its sandbox was closed"
        try:
            yield
        except Exception as exc:
            timer.cancel()
            timer.join()  # a close under way finishes before the step's fate is read
            if timed_out.is_set():
                raise StepTimeoutError(message) from exc
            raise
        timer.cancel()
        timer.join()
        if timed_out.is_set():
            raise StepTimeoutError(message)

    def _record(self, action: Action, result: StepResult, started_at: datetime, latency_s: float) -> Step:
        info = {**result.info, **self._info} if self._info else result.info
        step = Step(
            index=len(self.steps),
            action=action,
            observation=result.observation,
            started_at=started_at,
            latency_s=latency_s,
            reward=result.reward,
            done=result.done,
            info=info,
        )
        self.steps.append(step)
        return step

    def _fail(self, exc: Exception, action: Action, started_at: datetime, latency_s: float) -> Step | None:
        index = len(self.steps)
        self.healthy = False
        self.failure = Failure(exc, action, index)
        self.outcome = Outcome("error", f"step {index} failed: {type(exc).__name__}: {exc}", error_kind(exc))
        result = exc.result if isinstance(exc, SandboxCrashedError) else None
        return self._record(action, result, started_at, latency_s) if result is not None else None

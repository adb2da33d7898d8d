"""Stage 5: drop trajectories a world model cannot learn from, each with its reason.

- "too_short": fewer than two steps (no history to predict from).
- "oversize": more than `max_steps` steps, or more than `max_chars` characters of action and
  observation text (initial observation included).
- "all_errors": every step's observation is an error (see `is_error_observation`).
- "simulated": a world model answered some or all of its steps (`provenance.simulated`: a
  collector's --backend simulator, or --fallback-simulator after a real sandbox failed), so a world
  model is never trained on simulated turns as if they were real.
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam

from beam_pipelines.dead_letter import DEAD_LETTER, OK, DeadLetter, count
from schemas import Observation, Trajectory

STAGE = "filter"


def is_error_observation(observation: Observation) -> bool:
    """An observation that reports a failure: format "error" (a sandbox or tool error), a command
    that timed out, one that exited with a nonzero status (`exit_code` of the terminal, `exit_status`
    of a SWE tool), or an MCP result flagged `is_error`. A step without an exit status (keystrokes
    into a running program, a file read) is not an error."""
    if observation.format == "error":
        return True
    data = observation.data
    if data.get("timed_out") is True or data.get("is_error") is True:
        return True
    for key in ("exit_code", "exit_status"):
        status = data.get(key)
        if isinstance(status, int) and not isinstance(status, bool) and status != 0:
            return True
    return False


def text_chars(t: Trajectory) -> int:
    return len(t.initial_observation.text) + sum(
        len(step.action.text) + len(step.observation.text) for step in t.steps
    )


def rejection(t: Trajectory, max_steps: int, max_chars: int) -> tuple[str, str] | None:
    """(reason, detail) when `t` is to be dropped, else None."""
    if t.provenance.simulated:
        fallback = t.environment.config.get("fallback")
        if isinstance(fallback, dict):
            return "simulated", f"fell back to the simulator from step {fallback.get('from_step')}"
        return "simulated", f"recorded against a world model ({t.environment.backend})"
    if len(t.steps) < 2:
        return "too_short", f"{len(t.steps)} step(s); at least 2 are needed"
    if len(t.steps) > max_steps:
        return "oversize", f"{len(t.steps)} steps > max_steps {max_steps}"
    chars = text_chars(t)
    if chars > max_chars:
        return "oversize", f"{chars} characters > max_chars {max_chars}"
    if all(is_error_observation(step.observation) for step in t.steps):
        return "all_errors", f"all {len(t.steps)} observations are errors"
    return None


class _Filter(beam.DoFn):
    def __init__(self, max_steps: int, max_chars: int) -> None:
        self._max_steps, self._max_chars = max_steps, max_chars

    def process(self, t: Trajectory) -> Iterator[object]:
        rejected = rejection(t, self._max_steps, self._max_chars)
        if rejected is None:
            count(STAGE, "kept")
            yield t
            return
        reason, detail = rejected
        count(STAGE, reason)
        yield beam.pvalue.TaggedOutput(
            DEAD_LETTER, DeadLetter(STAGE, reason, detail, trajectory_id=t.trajectory_id)
        )


class FilterTrajectories(beam.PTransform):
    """Trajectory -> {"ok": Trajectory, "dead_letter": DeadLetter with reason "too_short",
    "oversize", "all_errors" or "simulated"}."""

    def __init__(self, max_steps: int = 512, max_chars: int = 2_000_000) -> None:
        super().__init__()
        if max_steps < 2 or max_chars < 1:
            raise ValueError("max_steps must be >= 2 and max_chars >= 1")
        self._max_steps, self._max_chars = max_steps, max_chars

    def expand(self, trajectories: beam.PCollection) -> dict[str, beam.PCollection]:
        check = _Filter(self._max_steps, self._max_chars)
        results = trajectories | "Filter" >> beam.ParDo(check).with_outputs(DEAD_LETTER, main=OK)
        return {OK: results[OK], DEAD_LETTER: results[DEAD_LETTER]}

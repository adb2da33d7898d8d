"""Fleet counters shared by the worker threads, and the summary a run prints and saves."""

from __future__ import annotations

import json
import posixpath
import statistics
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from schemas.atomic import atomic_write
from schemas.records import Trajectory


@dataclass
class FleetSummary:
    out: str
    trajectories: int = 0  # written by this run
    skipped: int = 0  # already finished by an earlier run
    pending: int = 0  # slots left unwritten (interrupted, fatal, or failed validation) for a rerun
    steps: int = 0
    wall_s: float = 0.0
    steps_per_s: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    invalid_actions: int = 0
    sandbox_replacements: int = 0
    # task rewards: episodes whose verifier gave one (and their mean), whose task has no verifier,
    # and whose verifier could not run
    verified: int = 0
    mean_reward: float | None = None
    unverified: int = 0
    verifier_errors: int = 0
    # episodes a real sandbox failed in that went on on the fallback simulator (None: no fallback asked)
    fallbacks: int | None = None
    reset_median_s: float | None = None
    step_latency_median_s: float | None = None
    step_latency_p95_s: float | None = None
    interrupted_by: str | None = None
    fatal: str | None = None
    exit_code: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format(self) -> str:
        def seconds(value: float | None) -> str:
            return "n/a" if value is None else f"{value * 1000:.1f} ms"

        lines = [
            f"trajectories written: {self.trajectories} (skipped as already finished: {self.skipped},"
            f" left for a rerun: {self.pending})",
            f"steps: {self.steps} in {self.wall_s:.1f} s = {self.steps_per_s:.2f} steps/s",
            "outcomes: " + (", ".join(f"{k}={v}" for k, v in sorted(self.outcomes.items())) or "none"),
            "errors by kind: "
            + (", ".join(f"{k}={v}" for k, v in sorted(self.errors_by_kind.items())) or "none"),
            f"invalid actions: {self.invalid_actions}; sandboxes replaced: {self.sandbox_replacements}",
            f"task rewards: {self.verified} verified"
            + (f" (mean {self.mean_reward:.3f})" if self.mean_reward is not None else "")
            + f", {self.unverified} without a verifier, {self.verifier_errors} verifier errors",
            f"reset median: {seconds(self.reset_median_s)}; step latency median: "
            f"{seconds(self.step_latency_median_s)}, p95: {seconds(self.step_latency_p95_s)}",
            f"output: {self.out}",
        ]
        if self.fallbacks is not None:  # --fallback-simulator was given
            lines.insert(
                -2,
                f"fell back to the simulator: {self.fallbacks} episode(s), simulated after the failure",
            )
        if self.interrupted_by:
            lines.append(f"interrupted by {self.interrupted_by}: in-flight episodes recorded as aborted")
        if self.fatal:
            lines.append(f"stopped early: {self.fatal}")
        return "\n".join(lines)


class FleetStats:
    """Thread-safe accumulation of what the workers did."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.trajectories = 0
        self.steps = 0
        self.invalid_actions = 0
        self.replacements = 0
        self.unwritable = 0
        self.reset_s: list[float] = []
        self.step_s: list[float] = []
        self.rewards: list[float] = []
        self.unverified = 0
        self.verifier_errors = 0
        self.fallbacks = 0

    def record(self, trajectory: Trajectory, reset_s: float | None) -> None:
        with self._lock:
            self.trajectories += 1
            self.outcomes[trajectory.outcome.status] += 1
            if trajectory.outcome.error_kind:
                self.errors[trajectory.outcome.error_kind] += 1
            if trajectory.outcome.reward is not None:
                self.rewards.append(trajectory.outcome.reward)
            elif trajectory.outcome.verification is not None:
                self.verifier_errors += 1
            else:
                self.unverified += 1
            if "fallback" in trajectory.environment.config:
                self.fallbacks += 1
            if reset_s is not None:
                self.reset_s.append(reset_s)
            for step in trajectory.steps:
                self.steps += 1
                self.step_s.append(step.latency_s)
                if step.observation.data.get("invalid_action"):
                    self.invalid_actions += 1

    def unwritable_trajectory(self) -> None:
        with self._lock:
            self.unwritable += 1

    def replaced_sandbox(self) -> None:
        with self._lock:
            self.replacements += 1

    def summary(self, out: str, skipped: int, pending: int, wall_s: float) -> FleetSummary:
        with self._lock:
            step_s = sorted(self.step_s)
            return FleetSummary(
                out=out,
                trajectories=self.trajectories,
                skipped=skipped,
                pending=pending + self.unwritable,
                steps=self.steps,
                wall_s=round(wall_s, 3),
                steps_per_s=round(self.steps / wall_s, 3) if wall_s > 0 else 0.0,
                outcomes=dict(self.outcomes),
                errors_by_kind=dict(self.errors),
                invalid_actions=self.invalid_actions,
                sandbox_replacements=self.replacements,
                verified=len(self.rewards),
                mean_reward=round(statistics.fmean(self.rewards), 4) if self.rewards else None,
                unverified=self.unverified,
                verifier_errors=self.verifier_errors,
                reset_median_s=statistics.median(self.reset_s) if self.reset_s else None,
                step_latency_median_s=statistics.median(step_s) if step_s else None,
                step_latency_p95_s=step_s[min(len(step_s) - 1, int(0.95 * len(step_s)))] if step_s else None,
            )


def write_summary(root: str, summary: FleetSummary) -> str:
    """Write ROOT/summary.json atomically (temp name + rename); returns its path."""
    target = posixpath.join(root, "summary.json")
    atomic_write(target, json.dumps(summary.to_dict(), indent=1, sort_keys=True))
    return target

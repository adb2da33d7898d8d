"""Scripted episodes through the real fleet runner, as the verifier tests of every domain play them:
each task's scripted actions once, the trajectories read back as written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from collectors.metrics import FleetSummary
from collectors.policies.scripted import ActionParser, ScriptedPolicy
from collectors.runner import FleetConfig, run_fleet
from collectors.tasks import TaskSpec
from sandboxes.base import Sandbox
from schemas import read_trajectories
from schemas.records import Trajectory


def run_scripted(
    domain: str,
    sandbox_factory: Callable[[], Sandbox],
    parse_action: ActionParser,
    specs: list[TaskSpec],
    out: Path,
    *,
    max_steps: int,
    sandboxes: int = 1,
) -> tuple[FleetSummary, dict[str, Trajectory]]:
    """One episode per spec in `sandboxes` parallel sandboxes, without a progress bar or signal
    handlers (pytest keeps its own): the fleet's summary, and the trajectories (validated) by task id."""
    summary = run_fleet(
        FleetConfig(
            domain=domain,
            sandbox_factory=sandbox_factory,
            policy_factory=lambda: ScriptedPolicy(specs, parse_action),
            tasks=specs,
            out=str(out),
            sandboxes=sandboxes,
            episodes=len(specs),
            max_steps=max_steps,
            progress=False,
            handle_signals=False,
        )
    )
    return summary, {t.task.id: t for t in read_trajectories(str(out), validate=True)}

"""Harbor tasks played through the real fleet runner in HarborSandbox, configured as the terminal
collector configures it: each play a list of scripted actions, run as a task of its own."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from collectors.metrics import FleetSummary
from collectors.tasks import TaskSpec
from collectors.terminal.harbor import harbor_spec, sandbox_config
from sandboxes.harbor import HarborSandbox
from sandboxes.harbor.images import BuiltImage
from sandboxes.harbor.loader import HarborTask
from sandboxes.terminal import parse_action
from schemas.records import Trajectory
from tests.sandboxes.scripted_runs import run_scripted

# The terminal collector's sandbox options, as its command line gives them.
CLI = argparse.Namespace(allow_network=False, cpus=1.0, memory="512m", pids_limit=256, command_timeout=10.0)


def harbor_sandboxes(task: HarborTask, image: BuiltImage) -> Callable[[], HarborSandbox]:
    config, _ = sandbox_config(task, image, CLI)
    return lambda: HarborSandbox(config)


def play_specs(
    task: HarborTask, image: BuiltImage, plays: dict[str, list[dict]], oracle: str = ""
) -> list[TaskSpec]:
    """The task once a play, under the play's label; the play labelled `oracle` plays the oracle, and
    only it is given the solution."""
    specs = []
    for label, actions in plays.items():
        spec = harbor_spec(task, image, oracle=label == oracle, with_solution=label == oracle)
        spec.task.id = label
        specs.append(TaskSpec(task=spec.task, actions=actions))
    return specs


def run_plays(
    task: HarborTask, image: BuiltImage, specs: list[TaskSpec], out: Path, max_steps: int
) -> tuple[FleetSummary, dict[str, Trajectory]]:
    """The specs in two sandboxes at once: the summary, and the trajectories by play label."""
    return run_scripted(
        "terminal", harbor_sandboxes(task, image), parse_action, specs, out, max_steps=max_steps, sandboxes=2
    )

"""Harbor task folders as a terminal task source: `python -m collectors.terminal --harbor-tasks DIR`.

For each task folder (read by harbor's own model, see sandboxes/harbor): build its image (refused
with the reason when its base image cannot be had), then play `solution/solve.sh` as the oracle;
a task whose oracle does not reach reward 1 is reported with its cause (sandboxes/harbor/diagnose.py:
the verifier's error or reward, exit status, commands that found no network, last output) and
skipped. A task whose oracle passes is also played by a do-nothing policy (one no-op command): when
that gets full reward too, test.sh cannot tell a solution from none, and the task is flagged (a
warning in the summary, its name in the summary's "flagged"); it still runs. Then the chosen policy
runs `--episodes` episodes of each validated task (default 1). Every episode, the oracle's and the
do-nothing one's too, is a trajectory in OUT whose outcome carries test.sh's reward and output;
their task ids end in ORACLE_SUFFIX and NOTHING_SUFFIX. The end summary (printed, and saved as
OUT/harbor_summary.json) lists each task's oracle verdict, do-nothing reward and policy rewards, and
each refused task with its reason.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from collectors.metrics import FleetSummary
from collectors.options import CliError, collector_version, policy_factory
from collectors.runner import FleetConfig, run_fleet, trajectory_id
from collectors.tasks import TaskSpec
from collectors.terminal.explorer import ExplorerPolicy
from sandboxes.harbor import (
    HARBOR,
    BuiltImage,
    HarborError,
    HarborSandbox,
    HarborTask,
    build_image,
    load_tasks,
    task_folders,
)
from sandboxes.harbor.diagnose import failure_cause
from sandboxes.terminal import TerminalConfig, make_backend, parse_action
from schemas import read_trajectories
from schemas.atomic import atomic_write
from schemas.lock import DatasetLock
from schemas.records import Task

ORACLE_SUFFIX = "#oracle"
NOTHING_SUFFIX = "#nothing"
NOTHING_COMMAND = "true"
FLAG_WARNING = (
    "oracle and a do-nothing policy both get reward 1.0: test.sh does not tell a solution from none"
)
SOLVE_COMMAND = "bash /solution/solve.sh"
# The terminal sandbox's longest command; a longer agent timeout still bounds the episode.
MAX_COMMAND_S = 600.0


@dataclass
class TaskReport:
    name: str
    path: str
    image: str = ""
    oracle_reward: float | None = None
    oracle_error: str = ""
    nothing_reward: float | None = None  # the do-nothing policy's, run once the oracle passed
    rewards: list[float | None] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def oracle_passed(self) -> bool:
        return self.oracle_reward == 1.0


@dataclass
class HarborSummary:
    tasks: list[TaskReport] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    flagged: list[str] = field(default_factory=list)  # tasks whose test.sh rewards doing nothing
    exit_code: int = 0

    def format(self) -> str:
        lines = [f"harbor tasks: {len(self.tasks)} run, {len(self.refused)} refused"]
        for report in self.tasks:
            oracle = "passed" if report.oracle_passed else "FAILED"
            why = "" if report.oracle_passed else report.oracle_error or f"reward {report.oracle_reward}"
            line = f"  {report.name}: oracle {oracle}{f' ({why})' if why else ''}"
            if report.oracle_passed:
                line += f"; do-nothing reward {report.nothing_reward}; policy rewards {report.rewards}"
            lines.append(line)
            lines += [f"    WARNING: {warning}" for warning in report.warnings]
            lines += [f"    error: {error}" for error in report.errors] + [
                f"    note: {n}" for n in report.notes
            ]
        lines += [f"  refused {path}: {why}" for path, why in self.refused.items()]
        if self.flagged:
            names = ", ".join(self.flagged)
            lines.append(f"WARNING: {len(self.flagged)} flagged (do-nothing gets full reward): {names}")
        return "\n".join(lines)


def harbor_spec(task: HarborTask, image: BuiltImage, oracle: bool, with_solution: bool) -> TaskSpec:
    """The task as recorded: what the sandbox needs in metadata["harbor"], test.sh as its verifier."""
    agent_timeout = task.agent.get("timeout_sec")
    meta: dict[str, Any] = {
        "name": task.name,
        "path": task.path,
        "image": image.tag,
        "role": "oracle" if oracle else "policy",
        "agent_timeout_sec": agent_timeout,
        "environment": task.environment,
    }
    if with_solution:
        meta["solution_dir"] = task.paths["solution_dir"]
    verifier = {
        "kind": HARBOR,
        "tests_dir": task.paths["tests_dir"],
        "timeout_sec": task.verifier.get("timeout_sec"),
        "user": task.verifier.get("user") or image.user,  # Harbor's default: the image's user
    }
    timeout = min(float(agent_timeout or MAX_COMMAND_S), MAX_COMMAND_S)
    return TaskSpec(
        task=Task(
            id=task.name + (ORACLE_SUFFIX if oracle else ""),
            instruction=task.instruction,
            metadata={"harbor": meta, "category": "harbor"},
            verifier=verifier,
        ),
        actions=[{"command": SOLVE_COMMAND, "timeout": timeout}],
    )


def nothing_spec(task: HarborTask, image: BuiltImage) -> TaskSpec:
    """The task played by a policy that does nothing (one no-op command), without the solution."""
    spec = harbor_spec(task, image, oracle=False, with_solution=False)
    spec.task.id = task.name + NOTHING_SUFFIX
    spec.task.metadata["harbor"]["role"] = "nothing"
    return TaskSpec(task=spec.task, actions=[{"command": NOTHING_COMMAND}])


def sandbox_config(
    task: HarborTask, image: str, args: argparse.Namespace
) -> tuple[TerminalConfig, list[str]]:
    """The task's docker limits and network, and notes on what was not given as asked."""
    env, notes = task.environment, []
    asks_network = env.get("network", "no-network") != "no-network"
    network = asks_network and args.allow_network
    if asks_network and not args.allow_network:
        notes.append(f"asks for network ({env['network']}): not given without --allow-network")
    if env.get("storage_mb"):
        notes.append(
            f"storage_mb={env['storage_mb']} is recorded, not enforced (docker's overlay has no quota here)"
        )
    backend = make_backend(
        "docker",
        image=image.tag,
        cpus=float(env.get("cpus") or args.cpus),
        memory=f"{env['memory_mb']}m" if env.get("memory_mb") else args.memory,
        pids_limit=args.pids_limit,
        network=network,
        # Without a network, the image's own offline settings (its wheelhouse and uv cache) apply.
        env=() if network else tuple(f"{k}={v}" for k, v in image.offline_env.items()),
    )
    return TerminalConfig(backend=backend, command_timeout=args.command_timeout), notes


def _fleet(
    args: argparse.Namespace,
    lock: DatasetLock,
    config: TerminalConfig,
    spec: TaskSpec,
    policy: Callable[[], Any],
    episodes: int,
    max_steps: int,
) -> FleetSummary:
    fleet = FleetConfig(
        domain="terminal",
        sandbox_factory=lambda: HarborSandbox(config),
        policy_factory=policy,
        tasks=[spec],
        out=args.out,
        sandboxes=min(args.sandboxes, max(episodes, 1)),
        episodes=episodes,
        max_steps=max_steps,
        seed=args.seed,
        collector="collectors.terminal",
        collector_version=collector_version(),
        progress=not args.no_progress,
        shard_rows=args.shard_rows,
        flush_interval_s=args.flush_interval,
        dataset_root=getattr(args, "dataset_root", ""),
    )
    return run_fleet(fleet, lock)


def _outcomes(out: str, seed: int, spec: TaskSpec, episodes: int) -> list[tuple[float | None, str]]:
    """(reward, why not full reward) of each recorded episode of `spec`, in slot order, read back
    from OUT; why: the verifier's error, exit status, commands without network and last output."""
    wanted = {trajectory_id("terminal", seed, slot, spec.id): slot for slot in range(episodes)}
    found: dict[int, tuple[float | None, str]] = {}
    for trajectory in read_trajectories(out):
        if trajectory.trajectory_id in wanted:
            outcome, check = trajectory.outcome, trajectory.outcome.verification
            if check is None:
                why = outcome.error or outcome.status
            elif outcome.reward == 1.0:
                why = ""
            else:
                why = failure_cause(outcome.reward, check.error, check.details, check.output)
                why = f"episode: {outcome.error}; {why}" if outcome.error else why
            found[wanted[trajectory.trajectory_id]] = (outcome.reward, why)
    return [found[slot] for slot in sorted(found)]


def run_harbor(args: argparse.Namespace, lock: DatasetLock) -> int:
    """Validate and run every task of --harbor-tasks into args.out (held by `lock`); exit code."""
    if args.policy == "replay":
        raise CliError("--harbor-tasks runs the task folders' own tasks: --policy replay does not apply")
    try:
        tasks, refused = load_tasks(task_folders(args.harbor_tasks))
    except HarborError as exc:
        raise CliError(str(exc)) from exc
    summary = HarborSummary(refused=dict(refused))
    for task in tasks:
        try:
            image = build_image(task, args.map_base_images)
        except HarborError as exc:
            summary.refused[task.path] = str(exc)
            print(f"harbor task {task.name}: refused: {exc}", file=sys.stderr)
            continue
        report, summary.exit_code = _run_task(args, lock, task, image)
        summary.tasks.append(report)
        if report.warnings:
            summary.flagged.append(report.name)
        if summary.exit_code:  # a signal or a fatal error stopped the fleet: stop here too
            break
    print(summary.format())
    atomic_write(posixpath.join(args.out, "harbor_summary.json"), json.dumps(asdict(summary), indent=1))
    return summary.exit_code or (
        1 if summary.refused or any(not r.oracle_passed for r in summary.tasks) else 0
    )


def _run_task(
    args: argparse.Namespace, lock: DatasetLock, task: HarborTask, image: BuiltImage
) -> tuple[TaskReport, int]:
    """The task's oracle, then its policy episodes; (report, the fleet's exit code when not 0)."""
    report = TaskReport(name=task.name, path=task.path, image=image.tag)
    config, report.notes = sandbox_config(task, image, args)
    if not task.paths.get("solve"):
        report.oracle_error = "no solution/solve.sh to validate the task with"
        return report, 0
    oracle = harbor_spec(task, image, oracle=True, with_solution=True)
    scripted = policy_factory(argparse.Namespace(policy="scripted"), [oracle], parse_action=parse_action)[0]
    fleet = _fleet(args, lock, config, oracle, scripted, episodes=1, max_steps=2)
    if fleet.exit_code:
        return report, fleet.exit_code
    outcomes = _outcomes(args.out, args.seed, oracle, 1)
    report.oracle_reward, why = outcomes[0] if outcomes else (None, fleet.fatal or "not recorded")
    if not report.oracle_passed:
        report.oracle_error = why
        return report, 0
    nothing = nothing_spec(task, image)
    idle = policy_factory(argparse.Namespace(policy="scripted"), [nothing], parse_action=parse_action)[0]
    fleet = _fleet(args, lock, config, nothing, idle, episodes=1, max_steps=1)
    if fleet.exit_code:
        return report, fleet.exit_code
    outcomes = _outcomes(args.out, args.seed, nothing, 1)
    report.nothing_reward = outcomes[0][0] if outcomes else None
    if report.nothing_reward == 1.0:
        report.warnings.append(FLAG_WARNING)
    spec = harbor_spec(task, image, oracle=False, with_solution=args.policy == "scripted")
    explorer = partial(ExplorerPolicy, command_timeout=min(10.0, args.command_timeout))
    policy = policy_factory(args, [spec], parse_action=parse_action, explorer=explorer)[0]
    episodes = 1 if args.episodes is None else args.episodes
    fleet = _fleet(args, lock, config, spec, policy, episodes, args.max_steps)
    for reward, why in _outcomes(args.out, args.seed, spec, episodes):
        report.rewards.append(reward)
        if reward is None:
            report.errors.append(why)
    return report, fleet.exit_code

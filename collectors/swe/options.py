"""The SWE collector's own options, task sources and repository preparation (see
collectors/swe/__main__.py)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from collectors.cli import Plan, Sandboxes, main_guard
from collectors.options import CliError, load_task_specs
from collectors.policies.base import Policy
from collectors.swe.explorer import SweExplorer
from collectors.swe.suite import templates_for
from collectors.swe.swebench import default_repos_dir, load_swebench
from collectors.swe.swebench_export import export
from collectors.tasks import TaskSpec
from sandboxes.base import SandboxError
from sandboxes.swe import SweConfig, SweSandbox, bash_action, make_config
from sandboxes.swe.repos import RepoError, default_cache_dir

DESCRIPTION = "Record SWE (read / edit / bash) trajectories on real repositories with a seeded bug."
BACKEND_HELP = "where bash runs (auto: bwrap when installed, else docker)"


def add_options(parser: argparse.ArgumentParser, group: Any) -> None:
    group.add_argument(
        "--cache-dir", metavar="DIR", help="prepared repositories (default: $AGENTWORLD_CACHE_DIR/swe)"
    )
    bench = parser.add_argument_group("SWE-bench instances")
    bench.add_argument(
        "--swebench", metavar="FILE", help="run these SWE-bench instances (JSONL) as the tasks"
    )
    bench.add_argument(
        "--swebench-repos", metavar="DIR",
        help="where their repositories are: DIR/owner__name (default: FILE's folder/<FILE stem>-repos)",
    )  # fmt: skip


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.swebench and args.tasks:
        parser.error("--swebench and --tasks are two task sources; give one")


def explorer(args: argparse.Namespace, found: object) -> Policy:
    return SweExplorer()


def cache_dir(args: argparse.Namespace) -> Path:
    return Path(args.cache_dir) if args.cache_dir else default_cache_dir()


def select_tasks(args: argparse.Namespace) -> list[TaskSpec]:
    """--swebench's usable instances (each unusable one named on stderr and skipped), else --tasks,
    else the embedded suite."""
    if not args.swebench:
        return load_task_specs(args, "swe")
    path = Path(args.swebench)
    repos = Path(args.swebench_repos) if args.swebench_repos else default_repos_dir(path)
    try:
        tasks, errors = load_swebench(path, repos, cache_dir(args))
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read --swebench {path}: {exc}") from exc
    for error in errors:
        print(f"skipping SWE-bench instance {error}", file=sys.stderr)
    if not tasks:
        raise CliError(f"no usable SWE-bench instances in {path}")
    if args.episodes is None:
        args.episodes = len(tasks)  # each instance once, as with --tasks
    return tasks


def used_tasks(tasks: list[TaskSpec], episodes: int) -> list[TaskSpec]:
    """The tasks the first `episodes` slots run (slot i runs tasks[i % len(tasks)])."""
    return tasks[: min(episodes, len(tasks))]


def prepare_templates(tasks: list[TaskSpec], cache: Path, progress: bool) -> None:
    """Build the repositories the run needs before sandboxes start, so the first resets do not wait
    on downloads and test runs; a task whose repository cannot be built stops the run here."""
    for spec in tasks:  # a task's own repository: named as missing here, not as a backend failure later
        template = spec.task.metadata.get("template")
        if template and not Path(template).is_dir():
            problem = "is not a directory" if Path(template).exists() else "does not exist"
            raise CliError(f"task {spec.id}: its repository {template} {problem} (metadata 'template')")
    started = time.monotonic()
    for n, spec in enumerate(tasks, start=1):
        if progress:
            print(f"\rpreparing repositories {n}/{len(tasks)}: {spec.id:<30}", end="", file=sys.stderr)
        try:
            templates_for([spec], cache)
        except RepoError as exc:
            raise CliError(f"task {spec.id}: {exc}") from exc
    if progress:
        print(
            f"\rprepared {len(tasks)} repositories in {time.monotonic() - started:.1f} s{' ' * 30}",
            file=sys.stderr,
        )


def probe(config: SweConfig, task: TaskSpec) -> None:
    """One reset and one bash step before the fleet starts, so a broken backend fails once."""
    try:
        with SweSandbox(config) as sandbox:
            sandbox.reset(task.task)
            result = sandbox.step(bash_action("python3 -c 'import pytest'", timeout_s=60))
    except SandboxError as exc:
        raise CliError(f"the SWE sandbox does not work with --backend {config.backend.kind}: {exc}") from exc
    if result.observation.data.get("exit_status") != 0:
        raise CliError(
            "python3 with pytest is not available inside the SWE sandbox (install python3-pytest): "
            + result.observation.text[-500:]
        )


@contextmanager
def sandboxes(plan: Plan) -> Iterator[Sandboxes]:
    args = plan.args
    cache = cache_dir(args)
    try:
        config = make_config(args.backend, cache_dir=cache)
    except (ValueError, SandboxError) as exc:
        raise CliError(f"--backend {args.backend}: {exc}") from exc

    def preflight() -> None:
        needed = used_tasks(plan.tasks, max(plan.episodes, 1))
        prepare_templates(needed, cache, progress=not args.no_progress)
        probe(config, needed[0])

    yield Sandboxes(lambda: SweSandbox(config), preflight=preflight)


def export_main(argv: list[str]) -> int:
    """`--export-swebench OUT`: a command of its own, which records nothing."""
    parser = argparse.ArgumentParser(
        prog="python -m collectors.swe --export-swebench",
        description="Write SWE tasks (default: the embedded suite) as SWE-bench instances, their "
        "repositories as bare git mirrors in <OUT stem>-repos next to OUT.",
    )
    parser.add_argument("--export-swebench", required=True, metavar="OUT", help="instances file (JSONL)")
    parser.add_argument("--tasks", metavar="FILE", help="JSONL task file (default: the embedded suite)")
    parser.add_argument("--cache-dir", metavar="DIR", help="prepared repositories")
    args = parser.parse_args(argv)
    out = Path(args.export_swebench)

    def run() -> int:
        tasks = load_task_specs(args, "swe")
        errors = export(tasks, out, default_repos_dir(out), cache_dir(args))
        for error in errors:
            print(f"not exported: {error}", file=sys.stderr)
        print(
            f"wrote {len(tasks) - len(errors)} instances to {out}; repositories in {default_repos_dir(out)}"
        )
        return 1 if errors else 0

    return main_guard(run)

"""Record SWE trajectories: `python -m collectors.swe --sandboxes N --episodes M --out DIR`;
`python -m collectors.swe prepare ...` downloads and builds the repositories (see its --help)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from collectors.cli import (
    CliError,
    add_fleet_arguments,
    default_episodes,
    load_task_specs,
    main_guard,
    open_output,
    policy_factory,
    run_cli,
    validate_counts,
)
from collectors.swe import prepare
from collectors.swe.explorer import SweExplorer
from collectors.swe.suite import templates_for
from collectors.tasks import TaskSpec
from sandboxes.base import SandboxError
from sandboxes.swe import SweConfig, SweSandbox, bash_action, make_config, parse_action
from sandboxes.swe.repos import RepoError, default_cache_dir
from sandboxes.terminal.reaper import reap_orphans

EPILOG = """examples:
  # 2 sandboxes, 10 explorer episodes on the embedded suite (24 PyPI projects x 2 seeded bugs);
  # repositories are downloaded and mutated on first use into $AGENTWORLD_CACHE_DIR/swe
  python -m collectors.swe --sandboxes 2 --episodes 10 --out data/swe

  # every task once with the scripted fix (run the tests, revert the bug, rerun): all succeed
  python -m collectors.swe --policy scripted --episodes 48 --out data/swe-scripted

  # prepare every repository ahead of time (what `make setup` runs), or check the whole suite
  python -m collectors.swe prepare
  python -m collectors.swe prepare --all --check

  # your own tasks: {"id", "instruction", "metadata": {"repo", "version", "seed", "test_command"}}
  # or {"metadata": {"template": "/path/to/a/git/repository", "test_command": [...]}}
  python -m collectors.swe --tasks my_tasks.jsonl --out data/swe-mine

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.swe --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --sandboxes 4 --out data/swe-llm

bash runs under bwrap (default when it works) or docker, without network; --backend local runs
it on this machine and only when asked. Rerunning the same command resumes: committed episodes are
skipped. One collector per --out.
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.swe",
        description="Record SWE (read / edit / bash) trajectories on real repositories with a seeded bug.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fleet_arguments(parser)
    group = parser.add_argument_group("swe sandbox")
    group.add_argument(
        "--backend", choices=("auto", "bwrap", "docker", "local"), default="auto",
        help="where bash runs (auto: bwrap when installed, else docker)",
    )  # fmt: skip
    group.add_argument(
        "--cache-dir", metavar="DIR", help="prepared repositories (default: $AGENTWORLD_CACHE_DIR/swe)"
    )
    args = parser.parse_args(argv)
    validate_counts(parser, args)
    return args


def used_tasks(tasks: list[TaskSpec], episodes: int) -> list[TaskSpec]:
    """The tasks the first `episodes` slots run (slot i runs tasks[i % len(tasks)])."""
    return tasks[: min(episodes, len(tasks))]


def prepare_templates(tasks: list[TaskSpec], cache_dir: Path, progress: bool) -> None:
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
            templates_for([spec], cache_dir)
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["prepare"]:
        return prepare.main(argv[1:])
    args = parse_args(argv)

    def run() -> int:
        with open_output(args.out) as lock:
            # Docker sandboxes' containers of a collector that died (and whose watchdogs died too).
            reaped = reap_orphans()
            if any(reaped.values()):
                print(f"removed what a collector that died left behind: {reaped}", file=sys.stderr)
            cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
            try:
                config = make_config(args.backend, cache_dir=cache_dir)
            except (ValueError, SandboxError) as exc:
                raise CliError(f"--backend {args.backend}: {exc}") from exc
            tasks = load_task_specs(args, "swe")
            policy = policy_factory(args, tasks, parse_action=parse_action, explorer=SweExplorer)
            episodes = default_episodes(args, policy[1], policy[2])

            def preflight() -> None:
                needed = used_tasks(policy[1], max(episodes, 1))
                prepare_templates(needed, cache_dir, progress=not args.no_progress)
                probe(config, needed[0])

            return run_cli(args, "swe", lambda: SweSandbox(config), policy, lock, preflight_sandbox=preflight)

    return main_guard(run)


if __name__ == "__main__":
    sys.exit(main())

"""Record SWE trajectories: `python -m collectors.swe --sandboxes N --episodes M --out DIR`;
`python -m collectors.swe prepare ...` downloads and builds the repositories (see its --help);
`--swebench FILE` runs SWE-bench instances of local repositories, `--export-swebench OUT` writes the
embedded tasks as such instances."""

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
    simulated,
    simulator_sandboxes,
    validate_counts,
)
from collectors.swe import prepare
from collectors.swe.explorer import SweExplorer
from collectors.swe.suite import templates_for
from collectors.swe.swebench import default_repos_dir, load_swebench
from collectors.swe.swebench_export import export
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

  # SWE-bench instances of repositories on this machine (DIR/owner__name, or `repo` a path); the
  # scripted policy applies each gold patch (the oracle): every reward should be 1
  python -m collectors.swe --swebench instances.jsonl --swebench-repos DIR --policy scripted \\
      --out data/swe-bench

  # the embedded tasks as SWE-bench instances, their repositories as mirrors in out/swe-bench-repos
  python -m collectors.swe --export-swebench out/swe-bench.jsonl

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.swe --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --sandboxes 4 --out data/swe-llm

  # a world model in place of the repository and its tools (nothing prepared): recorded as simulated
  python -m collectors.swe --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 10 --out data/swe-sim

bash runs under bwrap (default when it works) or docker, without network; --backend local runs
it on this machine and only when asked. Rerunning the same command resumes: committed episodes are
skipped. One collector per --out. After each episode the task's verifier runs in the same sandbox:
the failing tests must pass and the passing ones still pass (outcome.reward 1.0, else 0.0).
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
        "--backend", choices=("auto", "bwrap", "docker", "local", "simulator"), default="auto",
        help="where bash runs (auto: bwrap when installed, else docker); simulator: a world model"
        " answers instead (needs --model-endpoint)",
    )  # fmt: skip
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
    args = parser.parse_args(argv)
    if args.swebench and args.tasks:
        parser.error("--swebench and --tasks are two task sources; give one")
    validate_counts(parser, args)
    return args


def swebench_tasks(args: argparse.Namespace, cache_dir: Path) -> list[TaskSpec]:
    """The usable instances of --swebench; each unusable one is named on stderr and skipped."""
    path = Path(args.swebench)
    repos = Path(args.swebench_repos) if args.swebench_repos else default_repos_dir(path)
    try:
        tasks, errors = load_swebench(path, repos, cache_dir)
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read --swebench {path}: {exc}") from exc
    for error in errors:
        print(f"skipping SWE-bench instance {error}", file=sys.stderr)
    if not tasks:
        raise CliError(f"no usable SWE-bench instances in {path}")
    if args.episodes is None:
        args.episodes = len(tasks)  # each instance once, as with --tasks
    return tasks


def export_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.swe --export-swebench",
        description="Write SWE tasks (default: the embedded suite) as SWE-bench instances, their "
        "repositories as bare git mirrors in <OUT stem>-repos next to OUT.",
    )
    parser.add_argument("--export-swebench", required=True, metavar="OUT", help="instances file (JSONL)")
    parser.add_argument("--tasks", metavar="FILE", help="JSONL task file (default: the embedded suite)")
    parser.add_argument("--cache-dir", metavar="DIR", help="prepared repositories")
    args = parser.parse_args(argv)
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    out = Path(args.export_swebench)

    def run() -> int:
        tasks = load_task_specs(args, "swe")
        errors = export(tasks, out, default_repos_dir(out), cache_dir)
        for error in errors:
            print(f"not exported: {error}", file=sys.stderr)
        print(
            f"wrote {len(tasks) - len(errors)} instances to {out}; repositories in {default_repos_dir(out)}"
        )
        return 1 if errors else 0

    return main_guard(run)


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
    if any(arg == "--export-swebench" or arg.startswith("--export-swebench=") for arg in argv):
        return export_main(argv)
    args = parse_args(argv)

    def run() -> int:
        with open_output(args.out) as lock:
            cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
            if simulated(args):  # no repository is prepared, no bash runs
                tasks = swebench_tasks(args, cache_dir) if args.swebench else load_task_specs(args, "swe")
                policy = policy_factory(args, tasks, parse_action=parse_action, explorer=SweExplorer)
                return run_cli(args, "swe", simulator_sandboxes(args, "swe"), policy, lock)
            # Docker sandboxes' containers of a collector that died (and whose watchdogs died too).
            reaped = reap_orphans()
            if any(reaped.values()):
                print(f"removed what a collector that died left behind: {reaped}", file=sys.stderr)
            try:
                config = make_config(args.backend, cache_dir=cache_dir)
            except (ValueError, SandboxError) as exc:
                raise CliError(f"--backend {args.backend}: {exc}") from exc
            tasks = swebench_tasks(args, cache_dir) if args.swebench else load_task_specs(args, "swe")
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

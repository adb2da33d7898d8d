"""One command line for every collector: `collectors/<domain>/__main__.py` declares its CollectorSpec
with `CollectorSpec.declare(options, EXAMPLES)`, which reads the domain's own options, explorer and
sandbox setup from `collectors/<domain>/options.py` by name, and runs it with `SPEC.main(argv)`.

This module owns the rest, the same for every domain: parsing (the shared fleet, policy and
simulator options of `collectors.options` and `collectors.simulation`, and a `--backend` whose
choices are the domain record's backends plus `simulator`), the output lock, reaping what collectors
that died left behind, the run, its progress and summary, and the exit codes:
0 done; 1 when the fleet failed or every episode of the run ended in an error (nothing usable was
recorded, which a script must not take for success); 2 for an argument or setup error, with a
message naming the fix (argparse's own errors included); 130/143 on SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from collectors.options import (
    EXIT_USAGE,
    CliError,
    add_fleet_arguments,
    apply_shard,
    collector_version,
    default_episodes,
    load_task_specs,
    open_output,
    policy_factory,
    validate_counts,
)
from collectors.policies.base import Policy
from collectors.runner import FleetConfig, run_fleet
from collectors.simulation import (
    SIMULATOR,
    add_simulator_arguments,
    check_simulator_arguments,
    fallback_sandboxes,
    simulated,
    simulator_sandboxes,
)
from collectors.tasks import TaskSpec
from sandboxes.base import Sandbox
from sandboxes.domains import domain_spec
from sandboxes.terminal.reaper import reap_orphans, reap_own
from schemas import StorageError
from schemas.lock import DatasetLock

PolicyFactory = Callable[[], Policy]


class NothingToRecord(Exception):
    """The setup found nothing the run could record (no MCP server started): exit code 1."""


@dataclass
class Plan:
    """The run a domain's setup prepares for: the options, the tasks and the episode count (after
    the policy chose them: a replay brings its own)."""

    args: argparse.Namespace
    tasks: list[TaskSpec]
    episodes: int


@dataclass
class Sandboxes:
    """What a domain's setup hands the run."""

    factory: Callable[[], Sandbox]
    # Checked once before the fleet starts (a probe step, an SSH login), so a broken backend fails
    # here with the reason instead of in every episode; CliError stops the run (exit code 2).
    preflight: Callable[[], None] | None = None
    # What the setup learned that the explorer and `adapt_policy` use (the search index's topics,
    # each MCP server's tools); None under --backend simulator.
    found: Any = None


# The hooks CollectorSpec.declare reads from a domain's options module by these names, each where
# the module defines it; the rest keep the field's default.
HOOKS = (
    "sandboxes", "add_options", "check", "select_tasks", "explorer", "adapt_policy", "check_host",
    "run_instead",
)  # fmt: skip


@dataclass(frozen=True)
class CollectorSpec:
    """A collector: `package` names `collectors.<package>`, `sandboxes.<package>` and (through
    sandboxes.domains) the domain record holding its name, backends and action parser."""

    package: str
    description: str
    examples: str  # the --help epilog
    backend_help: str  # what --backend chooses; the simulator's line is added
    # A context manager over the real sandboxes of a Plan: starts what they share (a site server, an
    # emulator fleet), yields Sandboxes, stops it at the end.
    sandboxes: Callable[[Plan], AbstractContextManager[Sandboxes]]
    # Adds the domain's own options, to the parser or to the group that holds --backend.
    add_options: Callable[[argparse.ArgumentParser, Any], None] = lambda parser, group: None
    # Refuses option combinations with parser.error (exit code 2).
    check: Callable[[argparse.ArgumentParser, argparse.Namespace], None] = lambda parser, args: None
    # The tasks of a run; default: --tasks, else the embedded suite.
    select_tasks: Callable[[argparse.Namespace], list[TaskSpec]] | None = None
    # The domain's explorer, built per worker from the options and Sandboxes.found.
    explorer: Callable[[argparse.Namespace, Any], Policy] | None = None
    # Fits the chosen policy to the domain once the setup ran (the MCP agent's tool lookup).
    adapt_policy: Callable[[PolicyFactory, argparse.Namespace, Any], PolicyFactory] | None = None
    sandboxes_alias: str = ""  # the domain's word for --sandboxes (--browsers, --workers)
    # Before the output is locked: host checks needing no output (a missing browser), or a run that
    # writes nothing (android --dry-run); an exit code ends the command there.
    check_host: Callable[[argparse.Namespace], int | None] = lambda args: None
    # Under the lock, after reaping: a run of the domain's own in place of the fleet (terminal
    # --harbor-tasks), or None for the fleet.
    run_instead: Callable[[argparse.Namespace, DatasetLock], int | None] = lambda args, lock: None

    @classmethod
    def declare(cls, options: ModuleType, examples: str) -> CollectorSpec:
        """The spec of `collectors.<package>.options`, read by convention: its texts DESCRIPTION,
        BACKEND_HELP and SANDBOXES_ALIAS (optional), its hooks the functions named as in HOOKS. So
        a domain's __main__ states only its examples, and a new hook needs no line in seven files."""
        hooks = {name: getattr(options, name) for name in HOOKS if hasattr(options, name)}
        return cls(
            package=options.__name__.split(".")[1],
            description=options.DESCRIPTION,
            examples=examples,
            backend_help=options.BACKEND_HELP,
            sandboxes_alias=getattr(options, "SANDBOXES_ALIAS", ""),
            **hooks,
        )

    @property
    def collector(self) -> str:
        """The module recorded in provenance."""
        return f"collectors.{self.package}"

    def main(self, argv: list[str] | None = None) -> int:
        """`python -m collectors.<package> ARGV`: its exit code (see `main`)."""
        return main(self, argv)


def build_parser(spec: CollectorSpec) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {spec.collector}",
        description=spec.description,
        epilog=spec.examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fleet_arguments(parser, sandboxes_alias=spec.sandboxes_alias)
    add_simulator_arguments(parser)
    backends = domain_spec(spec.package).backends
    group = parser.add_argument_group(f"{spec.package} sandbox")
    group.add_argument(
        "--backend", choices=(*backends, SIMULATOR), default=backends[0],
        help=f"{spec.backend_help}; {SIMULATOR}: a world model answers instead (needs --model-endpoint"
        " or --model-gguf)"
        f" ({backends[0]})",
    )  # fmt: skip
    spec.add_options(parser, group)
    return parser


def parse_args(spec: CollectorSpec, argv: list[str] | None = None) -> argparse.Namespace:
    """The checked options; argparse's SystemExit(2) with a message naming the fix when refused."""
    parser = build_parser(spec)
    args = parser.parse_args(argv)
    validate_counts(parser, args)
    check_simulator_arguments(parser, args)
    spec.check(parser, args)
    apply_shard(args)  # before open_output: a shard locks its own sub-root
    return args


def main(spec: CollectorSpec, argv: list[str] | None = None) -> int:
    """`python -m collectors.<package>`: parse, lock, reap, set up, run; returns the exit code."""
    args = parse_args(spec, argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")

    def run() -> int:
        code = spec.check_host(args)
        if code is not None:
            return code
        real = not simulated(args)  # a simulated run starts nothing that could be left behind
        with open_output(args.out) as lock:
            if real:
                _reap_orphans()
            try:
                code = spec.run_instead(args, lock)
                return _collect(spec, args, lock) if code is None else code
            finally:
                if real:  # every sandbox closes itself; this matters when a worker did not stop in time
                    left = reap_own()
                    if any(left.values()):
                        print(f"removed what stuck workers still held: {left}", file=sys.stderr)

    return main_guard(run)


def _reap_orphans() -> None:
    reaped = reap_orphans()
    if any(reaped.values()):
        print(
            f"removed {reaped['containers']} containers, {reaped['tmux_servers']} tmux servers and"
            f" {reaped['process_boxes']} process boxes left behind by a collector that died",
            file=sys.stderr,
        )


def _collect(spec: CollectorSpec, args: argparse.Namespace, lock: DatasetLock) -> int:
    record = domain_spec(spec.package)
    tasks = spec.select_tasks(args) if spec.select_tasks else load_task_specs(args, spec.package)
    explorer = None
    if spec.explorer is not None:
        build = spec.explorer
        # Called per worker, so after the setup below has bound `current` (the closure reads it then).
        explorer = lambda: build(args, current.found)  # noqa: E731
    policy, tasks, policy_default = policy_factory(args, tasks, record.parse_action, explorer=explorer)
    plan = Plan(args, tasks, default_episodes(args, tasks, policy_default))
    with _sandboxes(spec, plan) as current:
        if spec.adapt_policy is not None:
            policy = spec.adapt_policy(policy, args, current.found)
        return run_cli(
            plan, record.name, current.factory, policy, lock,
            preflight_sandbox=current.preflight, collector=spec.collector,
        )  # fmt: skip


@contextmanager
def _sandboxes(spec: CollectorSpec, plan: Plan) -> Iterator[Sandboxes]:
    if simulated(plan.args):
        yield Sandboxes(simulator_sandboxes(plan.args, domain_spec(spec.package).name))
    else:
        with spec.sandboxes(plan) as sandboxes:
            yield sandboxes


def run_cli(
    plan: Plan,
    domain: str,
    sandbox_factory: Callable[[], Sandbox],
    factory: PolicyFactory,
    lock: DatasetLock,
    preflight_sandbox: Callable[[], None] | None = None,
    collector: str = "",
) -> int:
    """Run the fleet of `plan` (its parsed options, tasks and episode count) under `lock` (from
    open_output); returns the exit code. `collector` is the module recorded in provenance,
    `collectors.<domain>` unless given."""
    args = plan.args
    try:
        factory()  # a policy that cannot be built fails here once, not in every worker
    except Exception as exc:
        raise CliError(f"cannot build the {args.policy} policy: {type(exc).__name__}: {exc}") from exc
    if preflight_sandbox is not None and not simulated(args):
        preflight_sandbox()
    fallback = fallback_sandboxes(args, domain)
    config = FleetConfig(
        domain=domain,
        sandbox_factory=sandbox_factory,
        policy_factory=factory,
        tasks=plan.tasks,
        out=args.out,
        sandboxes=args.sandboxes,
        episodes=plan.episodes,
        max_steps=args.max_steps,
        seed=args.seed,
        collector=collector or f"collectors.{domain}",
        collector_version=collector_version(),
        progress=not args.no_progress,
        shard_rows=args.shard_rows,
        flush_interval_s=args.flush_interval,
        shard=getattr(args, "shard", None),
        dataset_root=getattr(args, "dataset_root", ""),
        fallback=fallback[0] if fallback else None,
        fallback_record=fallback[1] if fallback else {},
    )
    try:
        summary = run_fleet(config, lock)
    except StorageError as exc:
        raise CliError(str(exc)) from exc
    print(summary.format())
    if summary.exit_code == 0 and summary.outcomes and set(summary.outcomes) == {"error"}:
        # Every start URL unreachable, every server down: the run produced nothing usable.
        print(
            f"every episode ended in an error ({summary.outcomes['error']}): see the outcomes in {args.out}",
            file=sys.stderr,
        )
        return 1
    return summary.exit_code


def main_guard(run: Callable[[], int]) -> int:
    """CliError becomes a message and exit code 2, NothingToRecord one and 1, Ctrl-C before the
    fleet runs 130."""
    try:
        return run()
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NothingToRecord as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted before any episode started", file=sys.stderr)
        return 130

"""Command-line options every `python -m collectors.<domain>` shares, and the code behind them:
the fleet's options, the output and its lock, the task file, the policy.

Everything that can fail before sandboxes start is checked first and fails with CliError (exit code
2) and a message naming the fix, leaving neither the --out folder (when the run created it) nor a
lock behind.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata

from fsspec.core import url_to_fs

from collectors.policies import POLICIES, make_policy
from collectors.policies.base import Policy
from collectors.tasks import Shard, TaskSpec, embedded_tasks, load_tasks
from schemas import StorageError, TrajectoryWriter
from schemas.lock import DatasetLock
from schemas.records import Action
from schemas.storage import shard_dir_name

EXIT_USAGE = 2


class CliError(Exception):
    """A problem the user must fix before the run can start (exit code 2)."""


def add_fleet_arguments(
    parser: argparse.ArgumentParser, default_policy: str = "explorer", sandboxes_alias: str = ""
) -> None:
    """The arguments every collector shares. `sandboxes_alias` is a domain's own name for
    --sandboxes (--browsers, --workers), the same option under the word its users expect."""
    fleet = parser.add_argument_group("fleet")
    names = ["--sandboxes", "-n", *([sandboxes_alias] if sandboxes_alias else [])]
    fleet.add_argument(*names, dest="sandboxes", type=int, default=1, metavar="N",
                       help="parallel sandboxes (default 1)")  # fmt: skip
    fleet.add_argument(
        "--episodes", "-m", type=int, default=None, metavar="M",
        help="episodes to record (default: each task of --tasks once; else 10; with --policy"
        " replay, the recording's count)",
    )  # fmt: skip
    fleet.add_argument(
        "--out", "-o", required=True, metavar="DIR", help="dataset root (local path or fsspec URI)"
    )
    fleet.add_argument("--tasks", metavar="FILE", help="JSONL task file (default: the embedded suite)")
    fleet.add_argument(
        "--shard", type=_shard_argument, default=None, metavar="I/N",
        help="record only shard I of N (from 0) of the episodes, into OUT/shard-I-of-N: N pods with the"
        " same --out, tasks and --episodes, I = 0..N-1, record each episode once; readers read OUT whole",
    )  # fmt: skip
    fleet.add_argument(
        "--max-steps", type=int, default=20, metavar="K", help="steps per episode at most (20)"
    )
    fleet.add_argument(
        "--seed", type=int, default=0, help="run seed: trajectory ids and policy randomness (0)"
    )
    fleet.add_argument(
        "--shard-rows", type=int, default=256, metavar="R", help="trajectories per Parquet shard"
    )
    fleet.add_argument(
        "--flush-interval", type=float, default=30.0, metavar="SEC",
        help="commit buffered trajectories at least this often, so a crash loses little (30)",
    )  # fmt: skip
    fleet.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    fleet.add_argument("--log-level", default="WARNING", help="logging level (WARNING)")
    policy = parser.add_argument_group("policy")
    # explorer: the domain's own (CollectorSpec.explorer), which POLICIES does not hold
    policy.add_argument(
        "--policy",
        choices=sorted({"explorer", *POLICIES}),
        default=default_policy,
        help=f"({default_policy})",
    )
    policy.add_argument(
        "--replay-from", metavar="DATASET", help="dataset whose actions --policy replay plays"
    )
    policy.add_argument(
        "--llm-base-url", metavar="URL", help="OpenAI-compatible endpoint, e.g. http://host:8000/v1"
    )
    policy.add_argument("--llm-model", metavar="NAME", help="model name the endpoint serves")
    policy.add_argument("--llm-api-key", metavar="KEY", help="API key (default: $OPENAI_API_KEY, else none)")
    policy.add_argument("--llm-temperature", type=float, default=0.7, help="sampling temperature (0.7)")
    policy.add_argument("--llm-max-tokens", type=int, default=256, help="reply length cap per step (256)")


def _shard_argument(text: str) -> Shard:
    try:
        return Shard.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def apply_shard(args: argparse.Namespace) -> None:
    """With --shard, the run writes (and locks) its own sub-root OUT/shard-I-of-N, so shards of one
    dataset never contend for a lock, a manifest or summary.json; `args.dataset_root` keeps OUT,
    whose union of shards the run's resume consults and readers read."""
    args.dataset_root = args.out
    if getattr(args, "shard", None) is not None:
        args.out = f"{args.out.rstrip('/')}/{shard_dir_name(args.shard.index, args.shard.count)}"


@contextmanager
def open_output(out: str) -> Iterator[DatasetLock]:
    """`with open_output(out) as lock:` locks `out` for the run and probes that it can be written;
    CliError (exit 2) naming the other collector when one holds it. At exit the lock goes, and so do
    the folders this run created when nothing was written into them: a run refused after this point
    (a bad task file, policy or backend) leaves no trace."""
    lock = DatasetLock(out)
    created = _missing_folders(out) if lock.local else []
    try:
        try:
            lock.acquire()
            TrajectoryWriter(out).close()
        except StorageError as exc:
            raise CliError(str(exc)) from exc
        yield lock
    finally:
        lock.release()
        for folder in created:  # deepest first; one that holds anything keeps its parents too
            try:
                os.rmdir(folder)
            except OSError:
                break


def _missing_folders(out: str) -> list[str]:
    """The folders of the local path `out` that do not exist yet, deepest first."""
    missing = []
    path = os.path.abspath(url_to_fs(out)[1])
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def load_task_specs(args: argparse.Namespace, domain: str) -> list[TaskSpec]:
    if not args.tasks:
        return embedded_tasks(domain)
    try:
        specs, errors = load_tasks(args.tasks)
    except OSError as exc:
        raise CliError(f"cannot read task file {args.tasks}: {exc}") from exc
    for error in errors:
        print(f"skipping malformed task: {error}", file=sys.stderr)
    if not specs:
        raise CliError(f"no valid tasks in {args.tasks}")
    return specs


def policy_factory(
    args: argparse.Namespace,
    tasks: list[TaskSpec],
    parse_action: Callable[[str, dict], Action] | None = None,
    explorer: Callable[[], Policy] | None = None,
) -> tuple[Callable[[], Policy], list[TaskSpec], int | None]:
    """(factory, tasks, default episodes): replay brings its own tasks and episode count.
    `explorer` builds the domain's own explorer (collectors/<domain>/explorer.py)."""
    name = args.policy
    if name == "explorer":
        if explorer is None:
            raise CliError("--policy explorer: this collector has no explorer")
        return explorer, tasks, None
    if name == "scripted":
        return (lambda: make_policy("scripted", tasks=tasks, parse_action=parse_action)), tasks, None
    if name == "replay":
        if not args.replay_from:
            raise CliError("--policy replay needs --replay-from DATASET")
        try:
            recording = make_policy("replay", dataset=args.replay_from)
        except (StorageError, ValueError, OSError) as exc:
            raise CliError(f"cannot load --replay-from {args.replay_from}: {exc}") from exc
        replay_tasks = tasks if args.tasks else recording.task_specs()  # type: ignore[attr-defined]
        episodes = recording.episode_count  # type: ignore[attr-defined]
        return (lambda: make_policy("replay", recording=recording)), replay_tasks, episodes
    if name == "llm":
        if not args.llm_base_url or not args.llm_model:
            raise CliError("--policy llm needs --llm-base-url URL and --llm-model NAME")
        options = {
            "base_url": args.llm_base_url,
            "model": args.llm_model,
            "api_key": args.llm_api_key or os.environ.get("OPENAI_API_KEY"),
            "temperature": args.llm_temperature,
            "max_tokens": args.llm_max_tokens,
        }
        return (lambda: make_policy("llm", **options)), tasks, None
    raise CliError(f"unknown policy {name!r}")


def collector_version() -> str:
    try:
        return metadata.version("agentworld-data")
    except metadata.PackageNotFoundError:
        return "unknown"


def default_episodes(args: argparse.Namespace, tasks: list[TaskSpec], policy_default: int | None) -> int:
    """--episodes, else the policy's own count (replay), else each task of --tasks once, else 10."""
    if args.episodes is not None:
        return args.episodes
    if policy_default:
        return policy_default
    return len(tasks) if args.tasks else 10


def validate_counts(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The fleet's counts, refused through `parser` (exit code 2)."""
    if args.sandboxes < 1:
        parser.error("--sandboxes must be at least 1")
    if args.episodes is not None and args.episodes < 0:
        parser.error("--episodes must be >= 0")
    if args.max_steps < 1:
        parser.error("--max-steps must be at least 1")

"""Command-line options every `python -m collectors.<domain>` shares, and the code behind them.

A domain's entry point adds its sandbox options, takes the output with `open_output` (which
refuses a root that another collector holds), then calls `run_cli` with a sandbox factory.
Everything that can fail before sandboxes start (output location and its lock, task file, policy
inputs, building the policy) is checked first and fails with exit code 2 and a message naming the
fix, leaving neither the --out folder (when the run created it) nor a lock behind.

Every collector also takes a world model behind an OpenAI-compatible endpoint, found through the
`simulator` plugin (sandboxes.plugins): `--backend simulator --model-endpoint URL` records simulated
trajectories with the same CLI and schema, skipping the domain's real tools; `--fallback-simulator
URL` keeps the real sandboxes and lets the runner finish on the world model an episode whose sandbox
failed mid-way. The endpoint is asked for its models before the run, so a wrong URL fails at once.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata

from fsspec.core import url_to_fs

from collectors.policies import POLICIES, make_policy
from collectors.policies.base import Policy
from collectors.runner import FleetConfig, run_fleet
from collectors.tasks import Shard, TaskSpec, embedded_tasks, load_tasks
from sandboxes.base import Sandbox
from sandboxes.plugins import PluginMissingError, simulator_factory
from schemas import StorageError, TrajectoryWriter
from schemas.lock import DatasetLock
from schemas.records import Action
from schemas.storage import shard_dir_name

EXIT_USAGE = 2
# The --backend every collector has besides its real ones: a world model in place of the environment.
SIMULATOR = "simulator"
MODEL_KEY_ENV = "AGENTWORLD_MODEL_API_KEY"


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
    policy.add_argument(
        "--policy", choices=sorted(POLICIES), default=default_policy, help=f"({default_policy})"
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
    add_simulator_arguments(parser)


def add_simulator_arguments(parser: argparse.ArgumentParser) -> None:
    """--model-endpoint (with a collector's --backend simulator) and --fallback-simulator."""
    group = parser.add_argument_group(
        "simulator (a world model behind an OpenAI-compatible endpoint: vLLM, SGLang, llama.cpp)"
    )
    group.add_argument(
        "--model-endpoint", metavar="URL",
        help="with --backend simulator: the world model that stands in for the environment, e.g."
        " http://127.0.0.1:8000/v1; trajectories are recorded as simulated",
    )  # fmt: skip
    group.add_argument(
        "--model-name", metavar="NAME", help="model --model-endpoint serves (default: its first)"
    )
    group.add_argument(
        "--fallback-simulator", metavar="URL",
        help="when a real sandbox fails mid-episode, go on with the episode on the world model at URL"
        " (its steps marked simulated, the trajectory's environment.config.fallback says where and why)",
    )  # fmt: skip
    group.add_argument(
        "--fallback-model", metavar="NAME", help="model --fallback-simulator serves (default: its first)"
    )
    group.add_argument(
        "--model-api-key", metavar="KEY", help=f"the world model endpoint's key (default: ${MODEL_KEY_ENV})"
    )
    group.add_argument(
        "--model-max-tokens", type=int, default=1024, metavar="N",
        help="reply length cap per simulated step (1024)",
    )  # fmt: skip


def check_simulator_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The simulator options go together: refused with the option that is missing or out of place."""
    backend = getattr(args, "backend", None)
    if backend == SIMULATOR and not args.model_endpoint:
        parser.error(
            "--backend simulator needs --model-endpoint URL: the world model's OpenAI-compatible"
            " endpoint, e.g. http://127.0.0.1:8000/v1"
        )
    if args.model_endpoint and backend != SIMULATOR:
        parser.error(
            "--model-endpoint goes with --backend simulator; to go on on a simulator only when the"
            " real sandbox fails, give --fallback-simulator URL"
        )
    if args.model_name and not args.model_endpoint:
        parser.error("--model-name goes with --model-endpoint")
    if args.fallback_simulator and backend == SIMULATOR:
        parser.error(
            "--fallback-simulator is for real sandboxes; with --backend simulator every step is simulated"
        )
    if args.fallback_model and not args.fallback_simulator:
        parser.error("--fallback-model goes with --fallback-simulator")
    if args.model_max_tokens < 1:
        parser.error("--model-max-tokens must be at least 1")


def simulated(args: argparse.Namespace) -> bool:
    """--backend simulator: no real sandbox, so no real tools to look for before the run."""
    return getattr(args, "backend", None) == SIMULATOR


def simulator_sandboxes(args: argparse.Namespace, domain: str) -> Callable[[], Sandbox]:
    """The factory of simulated `domain` sandboxes of --backend simulator; CliError (exit 2) when
    the simulator is not installed or the endpoint does not serve the model."""
    factory, _ = _simulator(args, domain, args.model_endpoint, args.model_name, "--model-endpoint")
    try:  # one sandbox now (no request is made), so a domain the simulator cannot load fails here
        factory().close()
    except Exception as exc:
        raise CliError(f"cannot build a simulated {domain} sandbox: {type(exc).__name__}: {exc}") from exc
    return factory


def fallback_sandboxes(args: argparse.Namespace, domain: str) -> tuple[Callable[[], Sandbox], dict] | None:
    """(factory, record) of --fallback-simulator, None without it: what the runner takes an episode
    over with and what it records in environment.config["fallback"] (model, endpoint)."""
    if not getattr(args, "fallback_simulator", None):
        return None
    return _simulator(args, domain, args.fallback_simulator, args.fallback_model, "--fallback-simulator")


def _simulator(
    args: argparse.Namespace, domain: str, endpoint: str, model: str | None, option: str
) -> tuple[Callable[[], Sandbox], dict]:
    key = args.model_api_key or os.environ.get(MODEL_KEY_ENV) or None
    model = served_model(endpoint, model, key, option)
    try:
        factory = simulator_factory(
            domain, endpoint, model=model, api_key=key, max_new_tokens=args.model_max_tokens, seed=args.seed
        )
    except PluginMissingError as exc:
        raise CliError(str(exc)) from exc
    except ImportError as exc:  # the entry point is registered, its dependencies are not installed
        raise CliError(f"the simulator cannot load ({exc}): pip install -e '.[training]'") from exc
    return factory, {"model": model, "endpoint": endpoint}


def served_model(
    endpoint: str, model: str | None, api_key: str | None, option: str = "--model-endpoint"
) -> str:
    """`model` if `endpoint` serves it, else (None) the first model it serves; asked once before the
    run so an endpoint that is down, refuses the key or serves another model fails here, not in
    every episode."""
    request = urllib.request.Request(f"{endpoint.rstrip('/')}/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            served = [str(entry["id"]) for entry in json.load(response)["data"]]
    except urllib.error.HTTPError as exc:
        hint = {401: "give its key with --model-api-key", 403: "give its key with --model-api-key"}.get(
            exc.code, "is it an OpenAI-compatible URL ending in /v1?"
        )
        raise CliError(f"{option} {endpoint}: GET /models answered HTTP {exc.code}; {hint}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(
            f"{option} {endpoint} does not answer ({reason}): start the model server or fix the URL"
            " (e.g. http://127.0.0.1:8000/v1)"
        ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(
            f"{option} {endpoint}: /models is not an OpenAI-compatible model list ({exc})"
        ) from exc
    if not served:
        raise CliError(f"{option} {endpoint} serves no model")
    if model is None:
        return served[0]
    if model not in served:
        raise CliError(f"{option} {endpoint} does not serve {model!r}; it serves: {', '.join(served)}")
    return model


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
    explorer_options: dict | None = None,
    explorer: Callable[[], Policy] | None = None,
) -> tuple[Callable[[], Policy], list[TaskSpec], int | None]:
    """(factory, tasks, default episodes): replay brings its own tasks and episode count.
    `explorer` builds the domain's own explorer (collectors/<domain>/); the default is the terminal one."""
    name = args.policy
    if name == "explorer" and explorer is not None:
        return explorer, tasks, None
    if name == "scripted":
        return (lambda: make_policy("scripted", tasks=tasks, parse_action=parse_action)), tasks, None
    if name == "explorer":
        return (lambda: make_policy("explorer", **(explorer_options or {}))), tasks, None
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


def run_cli(
    args: argparse.Namespace,
    domain: str,
    sandbox_factory: Callable[[], Sandbox],
    policy: tuple[Callable[[], Policy], list[TaskSpec], int | None],
    lock: DatasetLock,
    preflight_sandbox: Callable[[], None] | None = None,
    collector: str = "",
) -> int:
    """Run the fleet from parsed options under `lock` (from open_output); returns the exit code.
    `collector` is the module recorded in provenance, `collectors.<domain>` unless given."""
    factory, tasks, policy_default = policy
    try:
        factory()  # a policy that cannot be built fails here once, not in every worker
    except Exception as exc:
        raise CliError(f"cannot build the {args.policy} policy: {type(exc).__name__}: {exc}") from exc
    if preflight_sandbox is not None and not simulated(args):
        preflight_sandbox()
    fallback = fallback_sandboxes(args, domain)
    episodes = default_episodes(args, tasks, policy_default)
    config = FleetConfig(
        domain=domain,
        sandbox_factory=sandbox_factory,
        policy_factory=factory,
        tasks=tasks,
        out=args.out,
        sandboxes=args.sandboxes,
        episodes=episodes,
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
    return summary.exit_code


def main_guard(run: Callable[[], int]) -> int:
    """Turn CliError into a message and exit code 2, and Ctrl-C before the fleet runs into 130."""
    try:
        return run()
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted before any episode started", file=sys.stderr)
        return 130


def validate_counts(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.sandboxes < 1:
        parser.error("--sandboxes must be at least 1")
    if args.episodes is not None and args.episodes < 0:
        parser.error("--episodes must be >= 0")
    if args.max_steps < 1:
        parser.error("--max-steps must be at least 1")
    check_simulator_arguments(parser, args)
    apply_shard(args)  # every collector calls this before open_output: the shard's sub-root is locked
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")

"""Record search trajectories: `python -m collectors.search --workers N --episodes M --out DIR`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from collectors.cli import (
    CliError,
    add_fleet_arguments,
    load_task_specs,
    main_guard,
    open_output,
    policy_factory,
    run_cli,
    simulated,
    simulator_sandboxes,
    validate_counts,
)
from collectors.search.explorer import SearchExplorer
from sandboxes.base import SandboxError
from sandboxes.search import (
    BuildParams,
    HttpLimits,
    SearchConfig,
    SearchSandbox,
    default_index_dir,
    ensure_index,
    make_backend,
    parse_action,
    search_action,
)
from sandboxes.search.build import DEFAULT_LIMIT, load_manifest, load_topics
from sandboxes.search.config import Backend
from schemas.records import Task

EPILOG = """examples:
  # 2 workers, 20 explorer episodes on the embedded corpus (Python manual + manual pages);
  # the first run builds the default index into $AGENTWORLD_CACHE_DIR/search-index (seconds)
  python -m collectors.search --workers 2 --episodes 20 --out data/search

  # a bigger corpus: build it once, then use it
  python -m sandboxes.search build-index --out data/search-index --limit 0
  python -m collectors.search --index data/search-index --episodes 200 --out data/search-big

  # a SearXNG instance (json enabled in its settings.yml); pages fetched from the real web
  python -m collectors.search --backend searxng --searxng-url http://localhost:8888 \\
      --rate-limit 1 --episodes 50 --out data/search-web

  # any JSON search API, described by a file with the json_api backend's fields
  #   {"url_template": "https://api.example/search?q={query}&count={count}&offset={offset}",
  #    "results_path": "data.items", "url_key": "link", "title_key": "name", "snippet_key": "summary"}
  python -m collectors.search --backend json_api --json-api api.json --episodes 50 --out data/api

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.search --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --workers 4 --out data/search-llm

  # a world model in place of the search engine and the pages: recorded as simulated
  python -m collectors.search --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/search-sim

With the embedded index, pages are served on 127.0.0.1 by each sandbox and recorded under stable
http://*.agentworld.test/ URLs; web_extractor reaches no other host unless --allow-fetch says so.
Rerunning the same command resumes: committed episodes are skipped. One collector per --out.
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.search",
        description="Record search (web_search / web_extractor) trajectories against a real search engine.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fleet_arguments(parser, sandboxes_alias="--workers")
    group = parser.add_argument_group("search sandbox")
    group.add_argument(
        "--backend", choices=("tantivy", "searxng", "json_api", "simulator"), default="tantivy",
        help="the search engine; simulator: a world model answers instead (needs --model-endpoint) (tantivy)",
    )  # fmt: skip
    group.add_argument(
        "--index", metavar="DIR",
        help="tantivy index from `python -m sandboxes.search build-index` (default: the cached default)",
    )  # fmt: skip
    group.add_argument(
        "--index-limit", type=int, default=DEFAULT_LIMIT, metavar="N",
        help=f"documents in the default index when it must be built ({DEFAULT_LIMIT})",
    )  # fmt: skip
    group.add_argument(
        "--searxng-url", default="http://127.0.0.1:8888", metavar="URL", help="SearXNG base URL"
    )
    group.add_argument("--json-api", metavar="FILE", help="JSON file with the json_api backend's fields")
    group.add_argument("--timeout", type=float, default=10.0, metavar="SEC", help="HTTP backend timeout (10)")
    group.add_argument(
        "--retries", type=int, default=3, help="HTTP backend retries on 5xx/429/connection (3)"
    )
    group.add_argument(
        "--rate-limit",
        type=float,
        default=2.0,
        metavar="PER_S",
        help="HTTP backend requests/s per worker (2)",
    )
    group.add_argument(
        "--allow-fetch", action="append", default=None, metavar="HOST",
        help="a host web_extractor may fetch besides the corpus's own; '*' for any; repeatable "
        "(default: none with tantivy, any with the HTTP backends)",
    )  # fmt: skip
    group.add_argument(
        "--max-page-chars", type=int, default=20_000, metavar="N", help="extracted page cap (20000)"
    )
    args = parser.parse_args(argv)
    if args.index_limit < 0:
        parser.error("--index-limit must be >= 0")
    validate_counts(parser, args)
    return args


def _backend(args: argparse.Namespace) -> tuple[Backend, list[str]]:
    """The backend config and the topics the explorer may search for."""
    http = HttpLimits(timeout_s=args.timeout, retries=args.retries, rate_limit_per_s=args.rate_limit)
    if args.backend == "searxng":
        return make_backend("searxng", url=args.searxng_url, http=http), []
    if args.backend == "json_api":
        if not args.json_api:
            raise CliError("--backend json_api needs --json-api FILE (see the examples in --help)")
        try:
            fields = json.loads(Path(args.json_api).read_text())
            return make_backend("json_api", **{**fields, "http": http}), []
        except (OSError, ValueError, TypeError) as exc:
            raise CliError(f"cannot use --json-api {args.json_api}: {exc}") from exc
    index = args.index
    if index is None:
        params = BuildParams(limit=args.index_limit)
        index = str(default_index_dir(params))
        if load_manifest(index) is None:
            print(
                f"building the default search index ({args.index_limit:,} documents) in {index}",
                file=sys.stderr,
            )
        try:
            ensure_index(index, params, progress=not args.no_progress)
        except (FileNotFoundError, FileExistsError, ValueError) as exc:
            raise CliError(f"cannot build the default search index: {exc}") from exc
    elif load_manifest(index) is None:
        raise CliError(
            f"{index} is not a search index; build one with `python -m sandboxes.search build-index`"
        )
    return make_backend("tantivy", index_dir=str(Path(index).resolve())), load_topics(index)


def search_config(args: argparse.Namespace, backend: Backend) -> SearchConfig:
    hosts = args.allow_fetch if args.allow_fetch is not None else ([] if args.backend == "tantivy" else ["*"])
    return SearchConfig(backend=backend, fetch_hosts=tuple(hosts), max_page_chars=args.max_page_chars)


def probe(config: SearchConfig) -> None:
    """One real search before the fleet starts, so a dead backend fails once, with what to do."""
    try:
        with SearchSandbox(config) as sandbox:
            sandbox.reset(Task(id="probe"))
            sandbox.step(search_action("test"))
    except SandboxError as exc:
        raise CliError(f"the {config.backend.kind} search backend does not work: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def run() -> int:
        with open_output(args.out) as lock:
            if simulated(args):
                tasks = load_task_specs(args, "search")
                policy = policy_factory(args, tasks, parse_action=parse_action, explorer=SearchExplorer)
                return run_cli(args, "search", simulator_sandboxes(args, "search"), policy, lock)
            backend, topics = _backend(args)
            config = search_config(args, backend)
            tasks = load_task_specs(args, "search")
            explorer = lambda: SearchExplorer(topics=topics)  # noqa: E731 - a factory, built per worker
            policy = policy_factory(args, tasks, parse_action=parse_action, explorer=explorer)
            return run_cli(
                args,
                "search",
                lambda: SearchSandbox(config),
                policy,
                lock,
                preflight_sandbox=lambda: probe(config),
            )

    return main_guard(run)


if __name__ == "__main__":
    sys.exit(main())

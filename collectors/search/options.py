"""The search collector's own options and backend setup (see collectors/search/__main__.py)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from collectors.cli import Plan, Sandboxes
from collectors.options import CliError
from collectors.policies.base import Policy
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
    search_action,
)
from sandboxes.search.build import DEFAULT_LIMIT, load_manifest, load_topics
from sandboxes.search.config import Backend
from schemas.records import Task

DESCRIPTION = "Record search (web_search / web_extractor) trajectories against a real search engine."
BACKEND_HELP = "the search engine"
SANDBOXES_ALIAS = "--workers"


def add_options(parser: argparse.ArgumentParser, group: Any) -> None:
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
        "--rate-limit", type=float, default=2.0, metavar="PER_S",
        help="HTTP backend requests/s per worker (2)",
    )  # fmt: skip
    group.add_argument(
        "--allow-fetch", action="append", default=None, metavar="HOST",
        help="a host web_extractor may fetch besides the corpus's own; '*' for any; repeatable "
        "(default: none with tantivy, any with the HTTP backends)",
    )  # fmt: skip
    group.add_argument(
        "--max-page-chars", type=int, default=20_000, metavar="N", help="extracted page cap (20000)"
    )


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.index_limit < 0:
        parser.error("--index-limit must be >= 0")


def explorer(args: argparse.Namespace, topics: list[str]) -> Policy:
    return SearchExplorer(topics=topics)


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


@contextmanager
def sandboxes(plan: Plan) -> Iterator[Sandboxes]:
    """The backend's sandboxes; `found` holds the topics of the index the explorer searches for."""
    backend, topics = _backend(plan.args)
    config = search_config(plan.args, backend)
    yield Sandboxes(lambda: SearchSandbox(config), preflight=lambda: probe(config), found=topics)

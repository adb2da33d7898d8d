"""`python -m sandboxes.search build-index ...` and `python -m sandboxes.search query ...`."""

from __future__ import annotations

import argparse
import json
import sys

from sandboxes.base import SandboxError
from sandboxes.search.actions import search_action
from sandboxes.search.build import (
    DEFAULT_LIMIT,
    DEFAULT_MAN_PAGES,
    DEFAULT_PYTHON_DOCS,
    BuildParams,
    build_index,
    default_index_dir,
)
from sandboxes.search.config import SearchConfig, TantivyBackend
from sandboxes.search.sandbox import SearchSandbox
from schemas.cli import command_parser, subcommands
from schemas.records import Task

EPILOG = """examples:
  # a small index (2,000 documents: Python manual sections and manual pages), built in seconds
  python -m sandboxes.search build-index --out data/search-index --limit 2000

  # everything: every section of the Python manual and every manual page (a few minutes)
  python -m sandboxes.search build-index --out data/search-full --limit 0

  # only the Python manual
  python -m sandboxes.search build-index --out data/py-index --man-pages ''

  # try it: the observation an agent would see
  python -m sandboxes.search query --index data/search-index "asyncio gather" --page 2

Without --out, build-index writes to the cache ($AGENTWORLD_CACHE_DIR/search-index/<key>), where
`python -m collectors.search` looks for its default index.
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_parser(
        "python -m sandboxes.search",
        "Build and query the embedded search corpus (tantivy index + served pages).",
        EPILOG,
    )
    commands = subcommands(parser)
    build = commands.add_parser("build-index", help="build an index from offline documents")
    build.add_argument("--out", metavar="DIR", help="index directory (default: the cache)")
    build.add_argument(
        "--python-docs", default=DEFAULT_PYTHON_DOCS, metavar="DIR",
        help=f"python3-doc HTML root; '' to leave out ({DEFAULT_PYTHON_DOCS})",
    )  # fmt: skip
    build.add_argument(
        "--man-pages", default=DEFAULT_MAN_PAGES, metavar="DIR",
        help=f"manual page root (man1..man8), rendered with mandoc; '' to leave out ({DEFAULT_MAN_PAGES})",
    )  # fmt: skip
    build.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
        help=f"documents in all, 3:1 Python sections to manual pages; 0 for all ({DEFAULT_LIMIT})",
    )  # fmt: skip
    build.add_argument("--seed", type=int, default=0, help="which documents a --limit keeps (0)")
    build.add_argument("--force", action="store_true", help="replace an existing index at --out")
    build.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    query = commands.add_parser("query", help="run one web_search and print the observation")
    query.add_argument("query", help="the search words")
    query.add_argument("--index", required=True, metavar="DIR", help="index directory")
    query.add_argument("--page", type=int, default=None, help="result page, 1-based")
    query.add_argument("--num-results", type=int, default=None, help="results per page (10)")
    query.add_argument("--json", action="store_true", help="print the structured data instead")
    args = parser.parse_args(argv)
    if args.command == "build-index" and args.limit < 0:
        parser.error("--limit must be >= 0")
    return args


def _build(args: argparse.Namespace) -> int:
    params = BuildParams(
        python_docs=args.python_docs, man_pages=args.man_pages, limit=args.limit, seed=args.seed
    )
    out = args.out or str(default_index_dir(params))
    try:
        manifest = build_index(out, params, progress=not args.no_progress, force=args.force)
    except (FileExistsError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sources = ", ".join(f"{n:,} {name}" for name, n in manifest["sources"].items())
    print(
        f"indexed {manifest['documents']:,} documents ({sources}) from {manifest['pages']:,} pages "
        f"in {manifest['build_s']:.1f}s\nindex: {out}"
    )
    return 0


def _query(args: argparse.Namespace) -> int:
    try:
        action = search_action(args.query, args.num_results, args.page)
        with SearchSandbox(SearchConfig(backend=TantivyBackend(index_dir=args.index))) as sandbox:
            sandbox.reset(Task(id="query"))
            observation = sandbox.step(action).observation
    except (SandboxError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(observation.data, indent=2) if args.json else observation.text)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return _build(args) if args.command == "build-index" else _query(args)


if __name__ == "__main__":
    sys.exit(main())

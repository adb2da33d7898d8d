"""`python -m collectors.importers FORMAT --input ... --out ...`: see --help."""

from __future__ import annotations

import argparse
import socket
import sys

from collectors.cli import CliError, collector_version, main_guard, open_output
from collectors.importers import FORMATS, load_importer
from collectors.importers.base import ImportContext
from collectors.importers.reading import MAX_DEPTH, MAX_ROW_BYTES, InputError
from collectors.importers.run import import_rows
from collectors.importers.terminal_text import MAX_COLUMNS, MAX_LINES, MAX_STEPS
from collectors.importers.workers import usable_cores

EXAMPLES = f"""examples:
  # SWE-agent trajectories from a local snapshot of nebius/SWE-agent-trajectories
  python -m collectors.importers swe_agent --input ~/hf/SWE-agent-trajectories/data --out data/raw
  # SWE-agent's own .traj files, straight from an S3 bucket
  python -m collectors.importers swe_agent_traj --input 's3://runs/swe-agent/**/*.traj' --out data/raw
  # MCP tool use from a local copy of Agent-Ark/Toucan-1.5M (one of its configs)
  python -m collectors.importers toucan --input ~/hf/Toucan-1.5M/Kimi-K2 --out data/raw
  # asciinema recordings, replayed into screens
  python -m collectors.importers asciinema --input casts/ --out data/raw --dataset my-casts --license CC0-1.0
  # then build corpora from everything under data/raw
  python -m beam_pipelines.build_corpus --input data/raw --output data/corpus

A rerun resumes: rows an earlier run imported are skipped. Rows that cannot be converted go to
OUT/dead_letter/import-FORMAT.jsonl with their reason, and the run goes on.

Limits (past one, the row is a dead letter saying which): a row (a JSON line, an array item, a
whole .traj or .cast file) of at most {MAX_ROW_BYTES // 2**20} MiB, nesting at most {MAX_DEPTH}
arrays/objects, in UTF-8; an asciinema terminal of at most {MAX_COLUMNS}x{MAX_LINES} and {MAX_STEPS:,}
actions. A truncated or corrupt .gz/.bz2/.xz file, or one that fails part-way, keeps the rows read
before the failure; the next file is read.
"""


def parser() -> argparse.ArgumentParser:
    formats = "\n".join(f"  {name:<16} {load_summary(name)}" for name in FORMATS)
    p = argparse.ArgumentParser(
        prog="python -m collectors.importers",
        description="Import a public agent-trajectory dataset into our trajectory schema.\n\nformats:\n"
        + formats,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("format", choices=list(FORMATS), metavar="FORMAT", help="the input's format (above)")
    p.add_argument(
        "--input",
        action="append",
        required=True,
        help="a file, folder or glob, local or any fsspec URI (repeatable)",
    )
    p.add_argument("--out", required=True, help="the trajectory dataset root to write (path or URI)")
    p.add_argument("--dataset", help="the dataset's name in provenance (default: the format's dataset)")
    p.add_argument("--dataset-version", default="", help="the dataset's revision or release, for provenance")
    p.add_argument("--license", help="the dataset's licence, an SPDX id (default: the format's dataset's)")
    p.add_argument(
        "--domain",
        default="",
        help="the domain, for formats whose rows do not tell it (openai_chat: mcp or search; default: "
        "search when every call is web_search/web_extractor, else mcp; atif: default terminal)",
    )
    p.add_argument("--limit", type=int, help="read at most this many rows")
    p.add_argument("--shard-rows", type=int, default=256, help="trajectories per Parquet shard (256)")
    cores = usable_cores()
    p.add_argument(
        "--workers",
        type=int,
        default=cores,
        help="processes converting rows, each taking the next row as it frees up; each reads the whole "
        f"input and holds shards of its own in memory (default: the cores this run may use, {cores})",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def load_summary(name: str) -> str:
    try:
        return load_importer(name).summary
    except ImportError as exc:  # a format whose extra is missing still shows in --help
        return f"(unavailable: {exc})"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.limit is not None and args.limit < 0:
        raise CliError("--limit must be >= 0")
    if args.workers < 1:
        raise CliError("--workers must be >= 1")
    importer = load_importer(args.format)
    context = ImportContext(
        dataset=args.dataset or importer.dataset,
        version=args.dataset_version,
        license=args.license if args.license is not None else importer.license,
        collector_version=collector_version(),
        host=socket.gethostname(),
        domain=args.domain,
    )
    with open_output(args.out):
        try:
            summary = import_rows(
                importer,
                args.input,
                args.out,
                context,
                limit=args.limit,
                progress=not args.no_progress,
                shard_rows=args.shard_rows,
                workers=args.workers,
            )
        except InputError as exc:
            raise CliError(str(exc)) from exc
    print(summary.format_text())
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))

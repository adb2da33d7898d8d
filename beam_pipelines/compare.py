"""Compare two corpus output directories: do two runs (two runners, two machines) agree?

    python -m beam_pipelines.compare OUT_A OUT_B

Two outputs are equal when they hold the same files and each file has the same bytes, except where
bytes may differ without the content differing:
- JSON-lines files are compared as multisets of records (a runner may write lines in another order);
- Parquet files are compared as multisets of rows (row groups and row order are free);
- JSON documents (manifest, report) are compared with run-stamp fields removed (`VOLATILE_KEYS`).
Every difference is listed: missing files, extra files, and per file what differs. Exit status 1 on
any difference, 0 when equal.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from schemas.cli import command_parser

# fields that stamp a run rather than describe its output (wall times, dates); removed before comparing
VOLATILE_KEYS = frozenset({"seconds", "wall_seconds", "started", "finished", "created", "duration"})
MAX_SHOWN = 3  # differing records shown per file

EXAMPLES = """\
examples:
  # the same raw input built by FnApiRunner and by Prism
  python -m beam_pipelines.compare out/demo/corpus out/demo/corpus-prism

  # in a script: exit status 1 when the outputs differ
  python -m beam_pipelines.compare OUT_A OUT_B || echo "runners disagree"
"""


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _without_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_volatile(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


def _multiset_difference(a: Counter, b: Counter, what: str) -> list[str]:
    only_a, only_b = a - b, b - a
    if not only_a and not only_b:
        return []
    lines = [f"{sum(only_a.values())} {what} only in A, {sum(only_b.values())} only in B"]
    lines += [f"  A: {x[:200]}" for x in list(only_a)[:MAX_SHOWN]]
    lines += [f"  B: {x[:200]}" for x in list(only_b)[:MAX_SHOWN]]
    return lines


def _jsonl_records(path: Path) -> Counter:
    return Counter(_canonical(json.loads(line)) for line in path.read_text().splitlines() if line.strip())


def _parquet_rows(path: Path) -> Counter:
    return Counter(_canonical(row) for row in pq.read_table(path).to_pylist())


def _json_document(path: Path) -> str:
    return _canonical(_without_volatile(json.loads(path.read_text())))


def compare_file(a: Path, b: Path) -> list[str]:
    """What differs between two files of the same relative path ([] when they are equivalent)."""
    if a.read_bytes() == b.read_bytes():
        return []
    suffix = a.suffix
    try:
        if suffix == ".jsonl":
            return _multiset_difference(_jsonl_records(a), _jsonl_records(b), "records")
        if suffix == ".parquet":
            return _multiset_difference(_parquet_rows(a), _parquet_rows(b), "rows")
        if suffix == ".json":
            return [] if _json_document(a) == _json_document(b) else ["JSON content differs"]
    except (ValueError, OSError) as error:  # a corrupt file is a difference, not a crash
        return [f"cannot be read as {suffix}: {error}"]
    return ["bytes differ"]


def compare_outputs(a: str | Path, b: str | Path) -> list[str]:
    """Every difference between two corpus output directories, one line each ([] when equal)."""
    root_a, root_b = Path(a), Path(b)
    for root in (root_a, root_b):
        if not root.is_dir():
            raise FileNotFoundError(f"{root} is not a directory: give two corpus output directories")
    files_a, files_b = _files(root_a), _files(root_b)
    differences = [f"only in A: {f}" for f in sorted(files_a - files_b)]
    differences += [f"only in B: {f}" for f in sorted(files_b - files_a)]
    for relative in sorted(files_a & files_b):
        for line in compare_file(root_a / relative, root_b / relative):
            differences.append(f"{relative}: {line}")
    return differences


def main(argv: list[str] | None = None) -> int:
    p = command_parser(
        "python -m beam_pipelines.compare",
        "Compare two corpus output directories (records where order is free, run stamps "
        "ignored). Exit 1 on a difference.",
        EXAMPLES,
    )
    p.add_argument("a", help="first corpus output directory")
    p.add_argument("b", help="second corpus output directory")
    args = p.parse_args(argv)
    try:
        differences = compare_outputs(args.a, args.b)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    count = len(_files(Path(args.a)))
    if differences:
        print("\n".join(differences))
        print(f"DIFFERENT: {len(differences)} difference(s) between {args.a} and {args.b}")
        return 1
    print(f"EQUAL: {count} files in {args.a} and {args.b}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

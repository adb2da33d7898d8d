"""Command line: export the JSON Schema, validate a dataset, summarise a dataset."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from schemas.storage import StorageError, dataset_files, read_rows
from schemas.validation import ValidationError, validate_row

EPILOG = """examples:
  python -m schemas export-jsonschema --out trajectory.schema.json
  python -m schemas validate data/terminal-run           # a dataset root
  python -m schemas validate 'gs://bucket/run/domain=web/*.parquet'
  python -m schemas stats data/terminal-run
"""
MAX_ERRORS_SHOWN = 10


def export_jsonschema(args: argparse.Namespace) -> int:
    from schemas.jsonschema import trajectory_json_schema

    text = json.dumps(trajectory_json_schema(), indent=2, ensure_ascii=False) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


def validate_dataset(args: argparse.Namespace) -> int:
    files = dataset_files(args.path)
    valid, invalid, unreadable, problems = 0, 0, 0, []
    for file in files:
        try:
            for row in read_rows(file):
                try:
                    validate_row(row)
                    valid += 1
                except ValidationError as exc:
                    invalid += 1
                    problems.append(f"{file}: {exc}")
        except StorageError as exc:
            unreadable += 1
            problems.append(str(exc))
    print(
        f"{len(files)} files ({unreadable} unreadable), {valid + invalid} trajectories: "
        f"{valid} valid, {invalid} invalid"
    )
    for problem in problems[:MAX_ERRORS_SHOWN]:
        print(f"  {problem}")
    if len(problems) > MAX_ERRORS_SHOWN:
        print(f"  ... and {len(problems) - MAX_ERRORS_SHOWN} more")
    return 1 if problems else 0


def dataset_stats(args: argparse.Namespace) -> int:
    trajectories: Counter[str] = Counter()
    steps: Counter[str] = Counter()
    outcomes: Counter[tuple[str, str]] = Counter()
    for row in read_rows(args.path):
        domain = str(row.get("domain"))
        trajectories[domain] += 1
        steps[domain] += len(row.get("steps") or [])
        outcomes[(domain, str((row.get("outcome") or {}).get("status")))] += 1
    print(f"{'domain':<10} {'trajectories':>12} {'steps':>10}  outcomes")
    for domain in sorted(trajectories):
        per_outcome = ", ".join(f"{status}={n}" for (d, status), n in sorted(outcomes.items()) if d == domain)
        print(f"{domain:<10} {trajectories[domain]:>12} {steps[domain]:>10}  {per_outcome}")
    print(f"{'total':<10} {sum(trajectories.values()):>12} {sum(steps.values()):>10}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m schemas",
        description="Trajectory schema tools. PATH is a dataset root, a Parquet file or a glob, "
        "local or any fsspec URI.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export-jsonschema", help="print or write the trajectory JSON Schema")
    export.add_argument("--out", help="write to this file instead of stdout")
    export.set_defaults(run=export_jsonschema)
    check = commands.add_parser("validate", help="validate every trajectory; exit 1 if any is invalid")
    check.add_argument("path")
    check.set_defaults(run=validate_dataset)
    stats = commands.add_parser("stats", help="trajectories, steps and outcomes per domain")
    stats.add_argument("path")
    stats.set_defaults(run=dataset_stats)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

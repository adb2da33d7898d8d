"""Command line: export the JSON Schema, validate a dataset, summarise a dataset, export it as ATIF."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from schemas.cli import command_parser
from schemas.storage import StorageError, dataset_files, read_rows
from schemas.validation import ValidationError, validate_row

EPILOG = """examples:
  python -m schemas export-jsonschema --out trajectory.schema.json
  python -m schemas validate data/terminal-run           # a dataset root
  python -m schemas validate 'gs://bucket/run/domain=web/*.parquet'
  python -m schemas stats data/terminal-run
  python -m schemas export-atif data/terminal-run --out atif/   # Harbor's trajectory.json files
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
    """Per domain: trajectories, steps, outcomes and task rewards. `verified` counts trajectories
    whose verifier gave a reward, `unverified` those whose task has no verifier (or predates
    them), `verifier errors` those whose verifier could not run."""
    trajectories: Counter[str] = Counter()
    steps: Counter[str] = Counter()
    outcomes: Counter[tuple[str, str]] = Counter()
    rewards: dict[str, list[float]] = {}
    unverified: Counter[str] = Counter()
    verifier_errors: Counter[str] = Counter()
    for row in read_rows(args.path):
        domain = str(row.get("domain"))
        trajectories[domain] += 1
        steps[domain] += len(row.get("steps") or [])
        outcome = row.get("outcome") or {}
        outcomes[(domain, str(outcome.get("status")))] += 1
        if outcome.get("reward") is not None:
            rewards.setdefault(domain, []).append(float(outcome["reward"]))
        elif outcome.get("verification"):
            verifier_errors[domain] += 1
        else:
            unverified[domain] += 1
    header = f"{'domain':<10} {'trajectories':>12} {'steps':>10} {'verified':>9} {'reward':>7}"
    print(f"{header} {'unverified':>10} {'verifier errors':>15}  outcomes")
    for domain in sorted(trajectories):
        per_outcome = ", ".join(f"{status}={n}" for (d, status), n in sorted(outcomes.items()) if d == domain)
        got = rewards.get(domain, [])
        mean = f"{sum(got) / len(got):.3f}" if got else "-"
        counts = f"{trajectories[domain]:>12} {steps[domain]:>10} {len(got):>9} {mean:>7}"
        print(f"{domain:<10} {counts} {unverified[domain]:>10} {verifier_errors[domain]:>15}  {per_outcome}")
    every = [r for got in rewards.values() for r in got]
    mean = f"{sum(every) / len(every):.3f}" if every else "-"
    totals = f"{sum(trajectories.values()):>12} {sum(steps.values()):>10} {len(every):>9} {mean:>7}"
    print(f"{'total':<10} {totals} {sum(unverified.values()):>10} {sum(verifier_errors.values()):>15}")
    return 0


def export_atif(args: argparse.Namespace) -> int:
    from schemas.atif import export_dataset

    summary = export_dataset(args.path, args.out, f"ATIF-v{args.atif_version}")
    print(summary.format_text())
    return 1 if summary.skipped else 0


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser(
        "python -m schemas",
        "Trajectory schema tools. PATH is a dataset root, a Parquet file or a glob, local or any fsspec URI.",
        EPILOG,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export-jsonschema", help="print or write the trajectory JSON Schema")
    export.add_argument("--out", help="write to this file instead of stdout")
    export.set_defaults(run=export_jsonschema)
    check = commands.add_parser("validate", help="validate every trajectory; exit 1 if any is invalid")
    check.add_argument("path")
    check.set_defaults(run=validate_dataset)
    stats = commands.add_parser("stats", help="trajectories, steps, outcomes and task rewards per domain")
    stats.add_argument("path")
    stats.set_defaults(run=dataset_stats)
    atif = commands.add_parser(
        "export-atif", help="write each trajectory as Harbor's ATIF: OUT/<id>/agent/trajectory.json"
    )
    atif.add_argument("path")
    atif.add_argument("--out", required=True, help="the folder (path or URI) to write the trial folders in")
    atif.add_argument("--atif-version", choices=("1.6", "1.7"), default="1.7", help="the ATIF version (1.7)")
    atif.set_defaults(run=export_atif)
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

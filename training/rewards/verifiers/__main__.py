"""python -m training.rewards.verifiers: the rule verifiers over a predictions file, per domain.

    python -m training.rewards.verifiers --data 'bench/*.jsonl' --predictions preds.jsonl \
        [--out verdicts.jsonl]

`--data` are the AgentWorldBench records (the reference of each is `response[turn_idx-1]`) and
`--predictions` the rows `python -m training.agentworldbench infer` writes (`id` and the raw `reply`).
There is no noise floor here, so deterministic content is judged by the conservative line rule
(deterministic.py). It prints, per domain, how many replies were verified and the checks that failed
most; `--out` gets one verdict per record, `--json` the summary. A record without a prediction counts
as not verified, under the check name `missing`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from schemas.render import reference_observation
from training.bench_records import BenchError, read_jsonl, read_records
from training.rewards.verifiers.verifier import verify


def verdict_rows(records: list[dict], predictions: dict[str, dict]) -> list[dict]:
    rows = []
    for record in records:
        key = str(record["id"])
        reply = predictions.get(key, {}).get("reply")
        row = {"id": key, "task": record["task"], "turn_idx": record["turn_idx"]}
        if not isinstance(reply, str):
            rows.append({**row, "ok": False, "failures": [{"check": "missing", "reason": "no prediction"}]})
            continue
        rows.append({**row, **verify(record["task"], reply, reference_observation(record)).as_dict()})
    return rows


def summary(rows: list[dict]) -> dict:
    by_domain: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_domain[row["task"]].append(row)
    out = {}
    for domain, domain_rows in sorted(by_domain.items()):
        failed = Counter(f["check"] for r in domain_rows for f in r["failures"])
        out[domain] = {
            "replies": len(domain_rows),
            "verified": sum(r["ok"] for r in domain_rows) / len(domain_rows),
            "failed_checks": dict(failed.most_common()),
        }
    return out


def format_summary(table: dict) -> str:
    lines = [f"{'domain':<10} {'replies':>7} {'verified':>9}  most failed checks"]
    for domain, stats in table.items():
        top = ", ".join(f"{c} ({n})" for c, n in list(stats["failed_checks"].items())[:3]) or "-"
        lines.append(f"{domain:<10} {stats['replies']:>7} {100 * stats['verified']:>8.1f}%  {top}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m training.rewards.verifiers", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--data", nargs="+", required=True, help="AgentWorldBench JSONL files or globs")
    parser.add_argument("--predictions", type=Path, required=True, help="rows with `id` and `reply` (infer)")
    parser.add_argument("--out", type=Path, help="write one verdict per record here (JSONL)")
    parser.add_argument("--json", type=Path, help="write the per-domain summary here")
    args = parser.parse_args(argv)
    try:
        records = read_records(args.data)
        if not args.predictions.is_file():
            raise BenchError(f"{args.predictions}: no such file; pass the output of agentworldbench infer")
        rows = verdict_rows(records, read_jsonl(args.predictions))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = summary(rows)
    print(format_summary(table))
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(table, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

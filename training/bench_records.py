"""AgentWorldBench-format JSONL files read back: the records (each checked to be readable at its
`turn_idx`, ids unique) and the rows a resumable command appends by id. Shared by the bench commands
(training.agentworldbench) and the rule verifiers' command (training.rewards.verifiers), which both
take such files; it imports only `schemas`.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

from schemas.render import RecordError, check_record


class BenchError(ValueError):
    """Bad input files: the message says which file and line, and what to do."""


def read_records(patterns: list[str]) -> list[dict]:
    """Every record of the files, each checked to be readable at its turn_idx (`check_record`)."""
    files = sorted({f for p in patterns for f in (glob.glob(p) or [p])})
    records = []
    seen: dict[str, str] = {}
    for file in files:
        path = Path(file)
        if not path.is_file():
            raise BenchError(f"{file}: no such file; pass AgentWorldBench JSONL files (globs allowed)")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise BenchError(f"{file}:{n}: not JSON ({exc})") from None
            try:
                check_record(record)
            except RecordError as exc:
                raise BenchError(f"{file}:{n}: {exc}") from None
            # Results are kept by id: a repeated id would silently stand for two samples.
            key = str(record["id"])
            if key in seen:
                raise BenchError(f"{file}:{n}: id {key!r} already at {seen[key]}; ids must be unique")
            seen[key] = f"{file}:{n}"
            records.append(record)
    return records


def read_jsonl(path: Path) -> dict[str, dict]:
    """Rows by id; a line torn by a kill is skipped (that id is simply done again)."""
    rows: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                rows[str(row["id"])] = row
            except (ValueError, KeyError, TypeError):
                continue
    return rows

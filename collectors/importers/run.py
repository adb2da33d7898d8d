"""The import loop: stream rows, convert, validate, write; bad rows to the dead-letter file.

Resume: trajectory ids are a hash of (dataset, row id), so a rerun skips every row whose trajectory an
earlier run committed (`schemas.finished_ids`). A killed run loses only the rows still buffered for a
shard. The dead-letter file is rewritten by each run, which meets the same bad rows again.
"""

from __future__ import annotations

import json
import posixpath
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa
from fsspec.core import url_to_fs
from tqdm import tqdm

from collectors.importers.base import BadRow, ImportContext, Importer, SourceRow, build_trajectory, excerpt
from collectors.importers.base import trajectory_id as make_id
from collectors.importers.reading import Unreadable
from schemas import TRAJECTORY_SCHEMA, Trajectory, TrajectoryWriter, ValidationError, finished_ids, to_row
from schemas.atomic import atomic_open
from schemas.columnar import table_problems
from schemas.validation import validate_row

DEAD_LETTER_DIR = "dead_letter"


@dataclass
class ImportSummary:
    format: str
    dataset: str
    out: str
    read: int = 0
    imported: int = 0
    already: int = 0  # committed by an earlier run: skipped
    dead: Counter = field(default_factory=Counter)  # reason kind -> rows
    domains: Counter = field(default_factory=Counter)
    steps: int = 0
    elapsed_s: float = 0.0
    dead_letter_path: str = ""

    def format_text(self) -> str:
        rate = self.read / self.elapsed_s if self.elapsed_s else 0.0
        lines = [
            f"imported {self.imported:,} of {self.read:,} rows of {self.dataset} ({self.format}) into "
            f"{self.out} in {self.elapsed_s:.1f} s ({rate:,.0f} rows/s)",
            f"  steps: {self.steps:,}; by domain: "
            + (", ".join(f"{d} {n:,}" for d, n in sorted(self.domains.items())) or "none"),
        ]
        if self.already:
            lines.append(f"  already imported by an earlier run (skipped): {self.already:,}")
        dead = sum(self.dead.values())
        if dead:
            kinds = ", ".join(f"{kind} {n:,}" for kind, n in self.dead.most_common())
            lines.append(f"  dead letters: {dead:,} ({kinds}), reasons in {self.dead_letter_path}")
        return "\n".join(lines)


class DeadLetters:
    """OUT/dead_letter/import-<format>.jsonl: opened at the first bad row under a temporary name and
    renamed at the end; a run with none removes the file an earlier run left."""

    def __init__(self, out: str, format_name: str) -> None:
        self.path = posixpath.join(out, DEAD_LETTER_DIR, f"import-{format_name}.jsonl")
        self._held = None
        self._file = None
        self.count = 0

    def add(self, row: SourceRow, kind: str, reason: str) -> None:
        if self._held is None:
            self._held = atomic_open(self.path)
            self._file = self._held.__enter__()
        data = row.data.text if isinstance(row.data, Unreadable) else excerpt(row.data)
        line = {"row_id": row.row_id, "uri": row.uri, "kind": kind, "reason": reason, "row": data}
        self._file.write((json.dumps(line, ensure_ascii=False) + "\n").encode())
        self.count += 1

    def close(self, error: BaseException | None = None) -> None:
        if self._held is not None:
            self._held.__exit__(type(error) if error else None, error, None)
            return
        if error is None:
            fs, path = url_to_fs(self.path)
            if fs.exists(path):
                fs.rm(path)


def import_rows(
    importer: Importer,
    sources: Iterable[str],
    out: str,
    context: ImportContext,
    *,
    limit: int | None = None,
    progress: bool = True,
    shard_rows: int = 256,
) -> ImportSummary:
    """Import every row of `sources` into the trajectory dataset at `out`; see the module doc."""
    summary = ImportSummary(format=importer.name, dataset=context.dataset, out=out)
    done = finished_ids(out)
    started = time.monotonic()
    dead = DeadLetters(out, importer.name)
    summary.dead_letter_path = dead.path
    bar = tqdm(desc=f"importing {importer.name}", unit=" rows", disable=not progress, smoothing=0.1)
    error: BaseException | None = None
    try:
        with TrajectoryWriter(out, max_rows_per_shard=shard_rows, track_ids=False) as writer:
            shards = _Shards(writer, dead, summary, shard_rows)
            try:
                for row in _limited((row for source in sources for row in importer.read(source)), limit):
                    summary.read += 1
                    bar.update()
                    if make_id(importer.name, context.dataset, row.row_id) in done:
                        summary.already += 1
                        continue
                    trajectory, kind, reason = _convert(importer, row, context)
                    if trajectory is None:
                        summary.dead[kind] += 1
                        dead.add(row, kind, reason)
                        bar.set_postfix(dead=dead.count, refresh=False)
                    else:
                        shards.add(row, trajectory)
            finally:
                shards.flush()  # what was converted before a Ctrl-C or a failing source is kept
    except BaseException as exc:
        error = exc
        raise
    finally:
        bar.close()
        dead.close(error if error is not None and not isinstance(error, KeyboardInterrupt) else None)
        summary.elapsed_s = time.monotonic() - started
    return summary


def _limited(rows: Iterable[SourceRow], limit: int | None) -> Iterable[SourceRow]:
    for n, row in enumerate(rows):
        if limit is not None and n >= limit:
            return
        yield row


def _convert(
    importer: Importer, row: SourceRow, context: ImportContext
) -> tuple[Trajectory | None, str, str]:
    """(the trajectory, "", "") or (None, reason kind, reason) for the dead-letter file."""
    if isinstance(row.data, Unreadable):
        return None, "unreadable", row.data.reason
    try:
        return build_trajectory(importer, row, importer.convert(row, context), context), "", ""
    except BadRow as exc:
        return None, "bad_row", str(exc)
    # A shape the converter did not foresee must not end an import of millions of rows; the kind
    # `unexpected` in the summary says the converter needs a look. RecursionError and OverflowError:
    # a nested JSON string a converter parses, a number no date or integer can hold.
    except (
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
        IndexError,
        RecursionError,
        OverflowError,
    ) as exc:
        return None, "unexpected", f"{type(exc).__name__}: {exc}"


@dataclass
class _Pending:
    rows: list[dict] = field(default_factory=list)
    sources: list[SourceRow] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)


class _Shards:
    """Converted trajectories as Parquet rows per domain, checked a shard at a time by
    `schemas.columnar` (the rules of `schemas.validate`, at a fraction of its per-record cost) and
    committed with `TrajectoryWriter.write_table`; the rows it refuses go to the dead letters."""

    def __init__(
        self, writer: TrajectoryWriter, dead: DeadLetters, summary: ImportSummary, rows: int
    ) -> None:
        self._writer, self._dead, self._summary, self._rows = writer, dead, summary, rows
        self._pending: dict[str, _Pending] = {}

    def add(self, row: SourceRow, trajectory: Trajectory) -> None:
        self._writer.store_attachments(trajectory)
        try:
            encoded = to_row(trajectory)
        except ValueError as exc:  # a naive datetime: it has no instant
            self._refuse(row, f"the converted trajectory is invalid: {exc}")
            return
        pending = self._pending.setdefault(trajectory.domain, _Pending())
        pending.rows.append(encoded)
        pending.sources.append(row)
        pending.steps.append(len(trajectory.steps))
        if len(pending.rows) >= self._rows:
            self._commit(trajectory.domain)

    def flush(self) -> None:
        for domain in list(self._pending):
            self._commit(domain)

    def _commit(self, domain: str) -> None:
        pending = self._pending.pop(domain)
        try:
            table = pa.Table.from_pylist(pending.rows, schema=TRAJECTORY_SCHEMA)
        except (pa.ArrowException, TypeError, ValueError):
            table = self._typed_rows_only(pending)  # a value of the wrong type: find its row
        table, problems = table_problems(table)
        for index, problem in sorted(problems.items()):
            self._refuse(pending.sources[index], f"the converted trajectory is invalid: {problem}")
        if problems:
            keep = [i for i in range(table.num_rows) if i not in problems]
            table = table.take(keep)
            pending.steps = [pending.steps[i] for i in keep]
        if table.num_rows:
            self._writer.write_table(domain, table)
        self._summary.imported += table.num_rows
        self._summary.steps += sum(pending.steps)
        self._summary.domains[domain] += table.num_rows

    def _typed_rows_only(self, pending: _Pending) -> pa.Table:
        kept = _Pending()
        for encoded, source, steps in zip(pending.rows, pending.sources, pending.steps, strict=True):
            try:
                validate_row(encoded)
            except ValidationError as exc:
                self._refuse(source, f"the converted trajectory is invalid: {exc}")
                continue
            kept.rows.append(encoded)
            kept.sources.append(source)
            kept.steps.append(steps)
        pending.rows, pending.sources, pending.steps = kept.rows, kept.sources, kept.steps
        return pa.Table.from_pylist(kept.rows, schema=TRAJECTORY_SCHEMA)

    def _refuse(self, row: SourceRow, reason: str) -> None:
        self._summary.dead["invalid"] += 1
        self._dead.add(row, "invalid", reason)

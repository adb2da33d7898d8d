"""The import loop: stream rows, convert, validate, write; bad rows to the dead-letter file.

Resume: trajectory ids are a hash of (dataset, row id), so a rerun skips every row whose trajectory an
earlier run committed (`schemas.finished_ids`). A killed run loses only the rows still buffered for a
shard. The dead-letter file is rewritten by each run, which meets the same bad rows again.

Workers (`workers=N`): N processes share the rows out (`collectors.importers.workers`); each writes
shards of its own and its dead letters to a part file, which are joined into the one dead-letter file
at the end. The trajectories, dead letters and summary are those of one process; only the order of
rows within shards and of lines in the dead-letter file differ.
"""

from __future__ import annotations

import json
import os
import posixpath
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

import pyarrow as pa
from fsspec.core import url_to_fs
from tqdm import tqdm

from collectors.importers.base import BadRow, ImportContext, Importer, SourceRow, build_trajectory, excerpt
from collectors.importers.base import trajectory_id as make_id
from collectors.importers.reading import Unreadable
from collectors.importers.workers import Share, Stopped, run_shares
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
    workers: int = 1  # the processes that converted rows

    def add(self, other: ImportSummary) -> None:
        """Another worker's counts added to these."""
        self.read += other.read
        self.imported += other.imported
        self.already += other.already
        self.dead.update(other.dead)
        self.domains.update(other.domains)
        self.steps += other.steps

    def format_text(self) -> str:
        rate = self.read / self.elapsed_s if self.elapsed_s else 0.0
        workers = f", {self.workers} workers" if self.workers > 1 else ""
        lines = [
            f"imported {self.imported:,} of {self.read:,} rows of {self.dataset} ({self.format}) into "
            f"{self.out} in {self.elapsed_s:.1f} s ({rate:,.0f} rows/s{workers})",
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


def dead_letter_path(out: str, format_name: str) -> str:
    return posixpath.join(out, DEAD_LETTER_DIR, f"import-{format_name}.jsonl")


class DeadLetters:
    """A dead-letter file (OUT/dead_letter/import-<format>.jsonl, or a worker's part of it): opened at
    the first bad row under a temporary name and renamed at the end; a run with none removes the
    file an earlier run left."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._held = None
        self._file = None
        self.count = 0

    def add(self, row: SourceRow, kind: str, reason: str) -> None:
        data = row.data.text if isinstance(row.data, Unreadable) else excerpt(row.data)
        line = {"row_id": row.row_id, "uri": row.uri, "kind": kind, "reason": reason, "row": data}
        self.write((json.dumps(line, ensure_ascii=False) + "\n").encode())
        self.count += 1

    def write(self, lines: bytes) -> None:
        """Whole JSON lines, as `add` writes them (a worker's part, joined into the file)."""
        if self._held is None:
            self._held = atomic_open(self.path)
            self._file = self._held.__enter__()
        self._file.write(lines)

    def close(self, error: BaseException | None = None) -> None:
        if self._held is not None:
            self._held.__exit__(type(error) if error else None, error, None)
            return
        if error is None:
            fs, path = url_to_fs(self.path)
            if fs.exists(path):
                fs.rm(path)


@dataclass
class ImportJob:
    """One import, as each of its workers is given it (pickled to the spawned ones)."""

    importer: Importer
    sources: list[str]
    out: str
    context: ImportContext
    limit: int | None
    shard_rows: int
    done: set[str]  # the trajectory ids earlier runs committed, read once before any worker writes


def import_rows(
    importer: Importer,
    sources: Iterable[str],
    out: str,
    context: ImportContext,
    *,
    limit: int | None = None,
    progress: bool = True,
    shard_rows: int = 256,
    workers: int = 1,
) -> ImportSummary:
    """Import every row of `sources` into the trajectory dataset at `out`, in `workers` processes;
    see the module doc."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    job = ImportJob(importer, list(sources), out, context, limit, shard_rows, finished_ids(out))
    final = dead_letter_path(out, importer.name)
    started = time.monotonic()
    bar = tqdm(desc=f"importing {importer.name}", unit=" rows", disable=not progress, smoothing=0.1)
    shown = {"dead": 0}

    def report(read: int, dead: int) -> None:
        bar.update(read - bar.n)
        if dead != shown["dead"]:
            shown["dead"] = dead
            bar.set_postfix(dead=dead, refresh=False)

    try:
        if workers == 1:
            parts = [import_share(job, final, Share(report))]
        else:
            parts = _import_in_workers(job, final, workers, report)
    finally:
        bar.close()
    # The workers that ran: an import over before the others' start (see `workers`) had one.
    summary = ImportSummary(format=importer.name, dataset=context.dataset, out=out, workers=len(parts))
    for part in parts:
        summary.add(part)
    summary.dead_letter_path = final
    summary.elapsed_s = time.monotonic() - started
    return summary


def import_share(job: ImportJob, dead_letters: str, share: Share) -> ImportSummary:
    """One worker's rows of the import (`share`): convert, validate, write; its bad rows to the
    dead-letter file `dead_letters`."""
    importer = job.importer
    summary = ImportSummary(format=importer.name, dataset=job.context.dataset, out=job.out)
    dead = DeadLetters(dead_letters)
    error: BaseException | None = None
    try:
        with TrajectoryWriter(job.out, max_rows_per_shard=job.shard_rows, track_ids=False) as writer:
            shards = _Shards(writer, dead, summary, job.shard_rows)
            try:
                rows = (row for source in job.sources for row in importer.read(source))
                ordinals = 0
                for ordinal, row in enumerate(_limited(rows, job.limit)):
                    ordinals = ordinal + 1
                    if not share.mine(ordinal):
                        if share.exhausted():
                            break
                        continue
                    summary.read += 1
                    _import_row(job, row, shards, dead, summary)
                    share.tick(summary.read, dead.count)
                else:
                    share.ended(ordinals)
            finally:
                shards.flush()  # what was converted before a Ctrl-C or a failing source is kept
    except BaseException as exc:
        error = exc
        raise
    finally:
        # After Ctrl-C (or a stop the parent asked for) the dead letters so far are kept, like the rows.
        kept = error is None or isinstance(error, KeyboardInterrupt | Stopped)
        dead.close(None if kept else error)
    return summary


def _import_row(
    job: ImportJob, row: SourceRow, shards: _Shards, dead: DeadLetters, summary: ImportSummary
) -> None:
    if make_id(job.importer.name, job.context.dataset, row.row_id) in job.done:
        summary.already += 1
        return
    trajectory, kind, reason = _convert(job.importer, row, job.context)
    if trajectory is None:
        summary.dead[kind] += 1
        dead.add(row, kind, reason)
    else:
        shards.add(row, trajectory)


def _import_in_workers(
    job: ImportJob, final: str, workers: int, report: Callable[[int, int], None]
) -> list[ImportSummary]:
    """`import_share` in `workers` processes, their dead-letter parts joined into `final` as one
    process would have left it: kept after Ctrl-C, untouched after an error."""
    with tempfile.TemporaryDirectory(prefix="import-dead-letters-") as folder:
        try:
            summaries = run_shares(partial(_import_part, job, folder), workers, report)
        except KeyboardInterrupt:
            _join_parts(folder, workers, final)
            raise
        _join_parts(folder, workers, final)
        return summaries


def _join_parts(folder: str, workers: int, final: str) -> None:
    letters = DeadLetters(final)
    for index in range(workers):
        part = _part_path(folder, index)
        if os.path.exists(part):  # a worker without dead letters left none
            with open(part, "rb") as lines:
                while chunk := lines.read(1 << 20):
                    letters.write(chunk)
    letters.close()


def _import_part(job: ImportJob, folder: str, share: Share) -> ImportSummary:
    return import_share(job, _part_path(folder, share.index), share)


def _part_path(folder: str, index: int) -> str:
    return os.path.join(folder, f"part-{index}.jsonl")


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
            table = table.take(pa.array(keep, type=pa.int64()))  # typed: `[]` would be nulls, refused
            pending.steps = [pending.steps[i] for i in keep]
        if table.num_rows:  # a shard whose rows were all refused names no domain in the summary
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

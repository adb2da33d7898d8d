"""Stage 1: read trajectory Parquet files into `Trajectory` records, batch by batch.

The file list is expanded inside the pipeline (not on the driver) and reshuffled, so a cluster
spreads files over workers. A file that is not Parquet, or Parquet of another schema, is one
dead-letter record; a row that does not decode is one dead-letter record naming its field. Neither
stops the run.

An error raised by the filesystem itself (a dropped connection, a timeout, an object store's 5xx) says
nothing about the file: the read is retried with exponential backoff, carrying on after the rows
already emitted, and when every attempt fails the job fails with an error naming the file, rather
than passing the file off as corrupt and building a corpus without it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import IO, Any

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from beam_pipelines.dead_letter import DEAD_LETTER, OK, DeadLetter, count
from schemas import TRAJECTORY_SCHEMA, ValidationError
from schemas.storage import dataset_files
from schemas.validation import decode_row

STAGE = "read"
ATTEMPTS = 5  # with BACKOFF_S 0.5: waits of 0.5, 1, 2 and 4 s between attempts
BACKOFF_S = 0.5
logger = logging.getLogger(__name__)
# The fields a file must have to be a trajectory file at all; others may be missing (older
# schema versions get their defaults from the decoder).
_REQUIRED_COLUMNS = {
    "trajectory_id": pa.types.is_string,
    "domain": pa.types.is_string,
    "steps": pa.types.is_list,
}


def _foreign(schema: pa.Schema) -> str:
    """Why a file's schema is not a trajectory schema, or "" when it is one."""
    for name, is_expected in _REQUIRED_COLUMNS.items():
        if name not in schema.names:
            return f"not a trajectory file: no column {name}"
        if not is_expected(schema.field(name).type):
            return f"not a trajectory file: column {name} is {schema.field(name).type}"
    return ""


class TransientReadError(OSError):
    """The storage failed on every attempt to read a file: retry the job when it is reachable."""


class _Source:
    """The file object pyarrow reads from; remembers an error raised by the filesystem beneath it, so a
    storage failure is told apart from a file that does not decode."""

    mode = "rb"

    def __init__(self, raw: IO[Any]) -> None:
        self._raw = raw
        self.error: BaseException | None = None

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self._raw, name)(*args)
        except Exception as exc:
            self.error = exc
            raise

    def read(self, size: int = -1) -> bytes:
        return self._call("read", size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._call("seek", offset, whence)

    def tell(self) -> int:
        return self._call("tell")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def close(self) -> None:
        self._raw.close()


class _ReadFile(beam.DoFn):
    def __init__(self, batch_rows: int, attempts: int, backoff_s: float) -> None:
        self._batch_rows, self._attempts, self._backoff_s = batch_rows, attempts, backoff_s

    def process(self, path: str) -> Iterator[object]:
        done = [0]  # rows emitted (or dead-lettered) so far: a retry carries on after them
        for attempt in range(1, self._attempts + 1):
            try:
                yield from self._read(path, done)
                return
            except OSError as exc:
                if attempt == self._attempts:
                    raise TransientReadError(
                        f"{path}: the storage failed {attempt} times, last with {type(exc).__name__}: "
                        f"{exc}; nothing was dead-lettered. Check the storage is reachable and rerun."
                    ) from exc
                delay = self._backoff_s * 2 ** (attempt - 1)
                logger.warning(
                    "%s: %s: %s; retry %d in %.1f s", path, type(exc).__name__, exc, attempt, delay
                )
                count(STAGE, "transient_errors")
                time.sleep(delay)

    def _read(self, path: str, done: list[int]) -> Iterator[object]:
        """Rows of `path` after the first done[0]; raises OSError for storage failures only."""
        fs, local = url_to_fs(path)
        source = _Source(fs.open(local, "rb"))  # an error here is the storage's: it propagates
        try:
            parquet = pq.ParquetFile(source)
            detail = _foreign(parquet.schema_arrow)
            if detail:
                count(STAGE, "foreign_file")
                yield beam.pvalue.TaggedOutput(DEAD_LETTER, DeadLetter(STAGE, "foreign_file", detail, path))
                return
            columns = [name for name in TRAJECTORY_SCHEMA.names if name in parquet.schema_arrow.names]
            seen = 0
            # row group by row group: memory is bounded by one group, and a storage error late in a
            # large file costs a re-read of the groups after the rows already emitted only
            for group in range(parquet.num_row_groups):
                size = parquet.metadata.row_group(group).num_rows
                if seen + size <= done[0]:
                    seen += size
                    continue
                table = parquet.read_row_group(group, columns=columns)
                for batch in table.to_batches(max_chunksize=self._batch_rows):
                    rows = batch.to_pylist()
                    skip = max(0, min(len(rows), done[0] - seen))
                    seen += len(rows)
                    for row in rows[skip:]:
                        yield from self._decode(row, path)
                        done[0] += 1
        except (OSError, pa.ArrowException) as exc:
            if source.error is not None:
                raise OSError(f"{type(source.error).__name__}: {source.error}") from source.error
            # Rows already emitted stay emitted: the file is reported, not retried.
            count(STAGE, "corrupt_file")
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTER, DeadLetter(STAGE, "corrupt_file", f"{type(exc).__name__}: {exc}", path)
            )
        finally:
            source.close()

    def _decode(self, row: dict, path: str) -> Iterator[object]:
        try:
            trajectory = decode_row(row)
        except ValidationError as exc:
            count(STAGE, "undecodable_row")
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTER, DeadLetter(STAGE, "undecodable_row", str(exc), path, exc.trajectory_id)
            )
            return
        count(STAGE, "rows")
        yield trajectory


class ReadTrajectories(beam.PTransform):
    """`pattern` (a dataset root, a glob or one file; local path or fsspec URI) -> Trajectory.

    Returns {"ok": PCollection[Trajectory], "dead_letter": PCollection[DeadLetter]}. A storage error
    is retried `attempts` times in all, `backoff_s` doubling between them, then fails the job.
    """

    def __init__(
        self, pattern: str, batch_rows: int = 64, attempts: int = ATTEMPTS, backoff_s: float = BACKOFF_S
    ) -> None:
        super().__init__()
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {attempts}")
        self._pattern = pattern
        self._batch_rows, self._attempts, self._backoff_s = batch_rows, attempts, backoff_s

    def expand(self, root: beam.pvalue.PBegin) -> dict[str, beam.PCollection]:
        results = (
            root
            | "Pattern" >> beam.Create([self._pattern])
            | "ExpandFiles" >> beam.FlatMap(dataset_files)
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadFiles"
            >> beam.ParDo(_ReadFile(self._batch_rows, self._attempts, self._backoff_s)).with_outputs(
                DEAD_LETTER, main=OK
            )
        )
        return {OK: results[OK], DEAD_LETTER: results[DEAD_LETTER]}

"""Stage 1: read trajectory Parquet files into `Trajectory` records, batch by batch.

The file list is expanded inside the pipeline (not on the driver) and reshuffled, so a cluster
spreads files over workers. A file that is not Parquet, or Parquet of another schema, is one
dead-letter record; a row that does not decode is one dead-letter record naming its field. Neither
stops the run.
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs

from beam_pipelines.dead_letter import DEAD_LETTER, OK, DeadLetter, count
from schemas import TRAJECTORY_SCHEMA, ValidationError
from schemas.storage import dataset_files
from schemas.validation import decode_row

STAGE = "read"
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


class _ReadFile(beam.DoFn):
    def __init__(self, batch_rows: int) -> None:
        self._batch_rows = batch_rows

    def process(self, path: str) -> Iterator[object]:
        fs, local = url_to_fs(path)
        try:
            with fs.open(local, "rb") as source:
                parquet = pq.ParquetFile(source)
                detail = _foreign(parquet.schema_arrow)
                if detail:
                    count(STAGE, "foreign_file")
                    dead = DeadLetter(STAGE, "foreign_file", detail, path)
                    yield beam.pvalue.TaggedOutput(DEAD_LETTER, dead)
                    return
                columns = [name for name in TRAJECTORY_SCHEMA.names if name in parquet.schema_arrow.names]
                for batch in parquet.iter_batches(batch_size=self._batch_rows, columns=columns):
                    yield from self._decode(batch.to_pylist(), path)
        except (OSError, pa.ArrowException) as exc:
            # Rows already emitted stay emitted: the file is reported, not retried.
            count(STAGE, "corrupt_file")
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTER, DeadLetter(STAGE, "corrupt_file", f"{type(exc).__name__}: {exc}", path)
            )

    def _decode(self, rows: list[dict], path: str) -> Iterator[object]:
        for row in rows:
            try:
                trajectory = decode_row(row)
            except ValidationError as exc:
                count(STAGE, "undecodable_row")
                yield beam.pvalue.TaggedOutput(
                    DEAD_LETTER,
                    DeadLetter(STAGE, "undecodable_row", str(exc), path, exc.trajectory_id),
                )
                continue
            count(STAGE, "rows")
            yield trajectory


class ReadTrajectories(beam.PTransform):
    """`pattern` (a dataset root, a glob or one file; local path or fsspec URI) -> Trajectory.

    Returns {"ok": PCollection[Trajectory], "dead_letter": PCollection[DeadLetter]}.
    """

    def __init__(self, pattern: str, batch_rows: int = 64) -> None:
        super().__init__()
        self._pattern = pattern
        self._batch_rows = batch_rows

    def expand(self, root: beam.pvalue.PBegin) -> dict[str, beam.PCollection]:
        results = (
            root
            | "Pattern" >> beam.Create([self._pattern])
            | "ExpandFiles" >> beam.FlatMap(dataset_files)
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadFiles" >> beam.ParDo(_ReadFile(self._batch_rows)).with_outputs(DEAD_LETTER, main=OK)
        )
        return {OK: results[OK], DEAD_LETTER: results[DEAD_LETTER]}

from __future__ import annotations

import shutil
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages.read import ReadTrajectories
from schemas import TRAJECTORY_SCHEMA, to_row
from tests.beam_pipelines.conftest import FIXTURE, ids, pipeline


def test_reads_the_recorded_dataset(recorded):
    with pipeline() as p:
        out = p | ReadTrajectories(str(FIXTURE))
        assert_that(out[OK], equal_to(recorded))
        assert_that(out[DEAD_LETTER], equal_to([]), label="NoDeadLetters")


def test_corrupt_foreign_and_undecodable_are_dead_letters_and_the_rest_is_read(tmp_path: Path, recorded):
    shutil.copytree(FIXTURE / "domain=terminal", tmp_path / "data")
    (tmp_path / "data" / "corrupt.parquet").write_bytes(b"PAR1 this is not parquet at all")
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "data" / "foreign.parquet")
    rows = [to_row(t) for t in recorded[:2]]
    rows[0]["task"]["metadata"] = "{not json"
    pq.write_table(pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA), tmp_path / "data" / "mixed.parquet")

    with pipeline() as p:
        out = p | ReadTrajectories(str(tmp_path / "data" / "*.parquet"), batch_rows=4)
        assert_that(
            ids(out[OK], "Ids"), equal_to([t.trajectory_id for t in recorded] + [recorded[1].trajectory_id])
        )
        dead = out[DEAD_LETTER] | "Summary" >> beam.Map(
            lambda d: (d.reason, Path(d.source).name, d.trajectory_id, "task.metadata" in d.detail)
        )
        assert_that(
            dead,
            equal_to(
                [
                    ("corrupt_file", "corrupt.parquet", "", False),
                    ("foreign_file", "foreign.parquet", "", False),
                    ("undecodable_row", "mixed.parquet", recorded[0].trajectory_id, True),
                ]
            ),
            label="DeadLetters",
        )

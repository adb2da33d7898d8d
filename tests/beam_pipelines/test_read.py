from __future__ import annotations

import os
import shutil
from pathlib import Path

import apache_beam as beam
import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to
from fsspec.implementations.local import LocalFileSystem

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


class FlakyFileSystem(LocalFileSystem):
    """A local filesystem that fails the way an object store does: `open_failures` opens raise a
    dropped connection, and with `fail_mid_file` the first read at an offset in `data_range` (the
    file's second row group on) times out."""

    protocol = "flaky"
    root_marker = "/"
    open_failures = 0
    fail_mid_file = False
    data_range = (0, 0)
    injected = 0

    @classmethod
    def _strip_protocol(cls, path):
        path = path[len("flaky://") :] if isinstance(path, str) and path.startswith("flaky://") else path
        return super()._strip_protocol(path)

    def _open(self, path, mode="rb", **kwargs):
        cls = FlakyFileSystem
        if "r" in mode and cls.open_failures > 0:
            cls.open_failures -= 1
            cls.injected += 1
            raise ConnectionResetError(104, "Connection reset by peer")
        f = super()._open(path, mode, **kwargs)
        if "r" in mode and cls.fail_mid_file:
            read = f.read

            def flaky_read(n=-1):
                if cls.fail_mid_file and cls.data_range[0] <= f.tell() < cls.data_range[1]:
                    cls.fail_mid_file = False
                    cls.injected += 1
                    raise TimeoutError("read timed out")
                return read(n)

            f.read = flaky_read
        return f


@pytest.fixture
def flaky(tmp_path, recorded):
    fsspec.register_implementation("flaky", FlakyFileSystem, clobber=True)
    FlakyFileSystem.open_failures, FlakyFileSystem.fail_mid_file, FlakyFileSystem.injected = 0, False, 0
    rows = [to_row(t) for t in recorded]
    (tmp_path / "data").mkdir()
    table = pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA)
    path = tmp_path / "data" / "part.parquet"
    pq.write_table(table, path, row_group_size=len(rows) // 3)
    metadata = pq.read_metadata(path)
    second = metadata.row_group(1).column(0)
    start = min(o for o in (second.dictionary_page_offset, second.data_page_offset) if o is not None)
    FlakyFileSystem.data_range = (start, os.path.getsize(path) - metadata.serialized_size - 8)
    return f"flaky://{tmp_path}/data/*.parquet"


def test_transient_storage_errors_are_retried_and_no_row_is_lost_or_doubled(flaky, recorded):
    FlakyFileSystem.open_failures, FlakyFileSystem.fail_mid_file = 2, True
    with pipeline() as p:
        out = p | ReadTrajectories(flaky, batch_rows=2, attempts=4, backoff_s=0)
        assert_that(ids(out[OK], "Ids"), equal_to([t.trajectory_id for t in recorded]))
        assert_that(out[DEAD_LETTER], equal_to([]), label="NoDeadLetters")
    assert FlakyFileSystem.injected == 3 and not FlakyFileSystem.fail_mid_file


def test_storage_that_keeps_failing_fails_the_job_instead_of_dead_lettering(flaky):
    FlakyFileSystem.open_failures = 10
    with pytest.raises(Exception, match="the storage failed 3 times") as failure:
        with pipeline() as p:
            _ = p | ReadTrajectories(flaky, attempts=3, backoff_s=0)
    assert "ConnectionResetError" in str(failure.value)

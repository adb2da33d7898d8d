import json
from datetime import UTC, datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas.arrow import TRAJECTORY_SCHEMA
from schemas.codec import RowDecodeError, from_row, to_row
from schemas.records import SCHEMA_VERSION
from schemas.storage import read_trajectories
from tests.schemas.factories import rich_trajectory, small_trajectory


def test_row_round_trip_through_arrow():
    t = rich_trajectory()
    table = pa.Table.from_pylist([to_row(t)], schema=TRAJECTORY_SCHEMA)
    decoded = from_row(table.to_pylist()[0])
    assert decoded == t
    assert decoded.initial_observation.attachments[0].content is None  # transient, never in a row


def test_json_maps_are_sorted_text_keeping_unicode():
    row = to_row(rich_trajectory())
    metadata = row["task"]["metadata"]
    assert isinstance(metadata, str)
    assert metadata.index('"nested"') < metadata.index('"source"') < metadata.index('"tags"')
    keystrokes = json.loads(row["steps"][1]["action"]["arguments"])["keystrokes"]
    assert keystrokes[0]["keystrokes"] == "echo 'héllo 🌍'"
    assert "🌍" in row["steps"][1]["action"]["arguments"]  # ensure_ascii=False


def test_datetimes_become_utc_and_naive_ones_are_rejected():
    t = small_trajectory("t1")
    t.provenance.started_at = datetime(2026, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert to_row(t)["provenance"]["started_at"] == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert to_row(t)["provenance"]["started_at"].tzinfo == UTC
    t.steps[0].started_at = datetime(2026, 1, 1)
    with pytest.raises(ValueError, match=r"steps\[0\]\.started_at"):
        to_row(t)


def test_missing_newer_fields_get_their_defaults():
    row = to_row(small_trajectory("t1"))
    del row["schema_version"]
    del row["task"]["metadata"]
    del row["steps"][0]["reward"]
    t = from_row(row)
    assert t.schema_version == SCHEMA_VERSION
    assert t.task.metadata == {}
    assert t.steps[0].reward is None


def test_older_parquet_file_without_a_column_still_reads(tmp_path):
    """Simulates schema growth: a file written before `task.max_steps` and `schema_version` existed."""
    table = pa.Table.from_pylist([to_row(small_trajectory("old-1"))], schema=TRAJECTORY_SCHEMA)
    table = table.drop_columns(["schema_version"])
    task_type = TRAJECTORY_SCHEMA.field("task").type
    kept = [task_type.field(i) for i in range(task_type.num_fields) if task_type.field(i).name != "max_steps"]
    old_task = pa.StructArray.from_arrays(
        [table.column("task").combine_chunks().field(f.name) for f in kept], fields=kept
    )
    table = table.set_column(table.schema.get_field_index("task"), "task", old_task)
    pq.write_table(table, tmp_path / "old.parquet")

    (t,) = read_trajectories(str(tmp_path / "old.parquet"), validate=True)
    assert t.trajectory_id == "old-1"
    assert t.task.max_steps == 0
    assert t.schema_version == SCHEMA_VERSION


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda row: row.pop("outcome"), "outcome"),
        (lambda row: row["steps"][0].pop("latency_s"), "steps[0].latency_s"),
        (lambda row: row["steps"][0]["observation"].update(data="{not json"), "steps[0].observation.data"),
        (lambda row: row["policy"].update(config="[1, 2]"), "policy.config"),
        (lambda row: row.update(environment=None), "environment"),
    ],
)
def test_undecodable_rows_name_the_field(mutate, field):
    row = to_row(small_trajectory("t1"))
    mutate(row)
    with pytest.raises(RowDecodeError) as caught:
        from_row(row)
    assert caught.value.field == field

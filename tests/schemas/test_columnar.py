"""Whole-table validation finds what record validation finds, row by row."""

import json

import pyarrow as pa
import pytest

from schemas.arrow import TRAJECTORY_SCHEMA
from schemas.codec import to_row
from schemas.columnar import table_problems
from schemas.storage import TrajectoryWriter, read_trajectories
from tests.schemas.factories import rich_trajectory, small_trajectory


def rows() -> list[dict]:
    return [to_row(small_trajectory(f"t{i}")) for i in range(5)]


def test_valid_rows_have_no_problems_and_write_as_shards(tmp_path):
    table, problems = table_problems(pa.Table.from_pylist(rows(), schema=TRAJECTORY_SCHEMA))
    assert problems == {}
    with TrajectoryWriter(str(tmp_path), max_rows_per_shard=2) as writer:
        writer.write_table("terminal", table)
    back = sorted(t.trajectory_id for t in read_trajectories(str(tmp_path), validate=True))
    assert back == ["t0", "t1", "t2", "t3", "t4"]
    assert len(list(tmp_path.glob("domain=terminal/*.parquet"))) == 3


@pytest.mark.parametrize(
    ("break_row", "message"),
    [
        (lambda r: r.update(trajectory_id="  "), "trajectory_id is empty"),
        (lambda r: r.update(domain="kitchen"), "domain is not one of"),
        (lambda r: r["outcome"].update(status="won"), "outcome.status is not one of"),
        (lambda r: r["outcome"].update(reward=1.5), "outcome.reward is not in [0, 1]"),
        (lambda r: r["steps"][0].update(index=1), "steps must be indexed 0..n-1"),
        (lambda r: r["steps"][0].update(latency_s=-1.0), "latency_s is negative"),
        (
            lambda r: r["steps"][0]["action"].update(arguments=json.dumps([1])),
            "action.arguments is not a JSON",
        ),
        (lambda r: r["steps"][0]["observation"].update(text=None), "steps[].observation.text is null"),
        (lambda r: r["task"].update(id=None), "task.id is null"),
        (
            lambda r: r.update(initial_observation=to_row(rich_trajectory())["initial_observation"]),
            "not stored",
        ),
    ],
)
def test_each_broken_rule_names_its_row(break_row, message):
    data = rows()
    break_row(data[2])
    _, problems = table_problems(pa.Table.from_pylist(data, schema=TRAJECTORY_SCHEMA))
    assert list(problems) == [2]
    assert message in problems[2]


def test_a_null_optional_struct_does_not_make_its_children_required():
    data = rows()
    assert data[1]["outcome"]["verification"] is None
    _, problems = table_problems(pa.Table.from_pylist(data, schema=TRAJECTORY_SCHEMA))
    assert problems == {}

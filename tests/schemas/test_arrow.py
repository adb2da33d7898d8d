import dataclasses
import typing

import pyarrow as pa
import pytest

from schemas.arrow import TRAJECTORY_SCHEMA
from schemas.fields import field_type
from schemas.records import SCHEMA_VERSION, Attachment, Trajectory


def _struct_fields(arrow_type: pa.DataType) -> dict[str, pa.Field]:
    if pa.types.is_list(arrow_type):
        arrow_type = arrow_type.value_type
    return {arrow_type.field(i).name: arrow_type.field(i) for i in range(arrow_type.num_fields)}


def _assert_covers(cls: type, arrow_fields: dict[str, pa.Field], path: str) -> int:
    """Walk the dataclass with `dataclasses.fields` (independently of schemas.fields) and check each
    persisted field has an Arrow counterpart; returns how many fields were checked."""
    hints = typing.get_type_hints(cls)
    checked = 0
    for spec in dataclasses.fields(cls):
        if spec.metadata.get("transient"):
            assert spec.name not in arrow_fields, f"transient {path}{spec.name} must not be stored"
            continue
        assert spec.name in arrow_fields, f"{path}{spec.name} missing from TRAJECTORY_SCHEMA"
        checked += 1
        hint = hints[spec.name]
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is list else hint
        if dataclasses.is_dataclass(inner):
            nested = _struct_fields(arrow_fields[spec.name].type)
            checked += _assert_covers(inner, nested, f"{path}{spec.name}.")
    return checked


def test_every_dataclass_field_is_in_the_arrow_schema():
    top = {f.name: f for f in TRAJECTORY_SCHEMA}
    checked = _assert_covers(Trajectory, top, "")
    assert checked >= 50  # the whole tree was walked, not just the top level
    assert len(top) == len(dataclasses.fields(Trajectory))


def test_types_follow_the_hints():
    steps = _struct_fields(TRAJECTORY_SCHEMA.field("steps").type)
    assert steps["index"].type == pa.int64() and not steps["index"].nullable
    assert steps["latency_s"].type == pa.float64()
    assert steps["reward"].type == pa.float64() and steps["reward"].nullable
    assert steps["done"].type == pa.bool_()
    assert steps["started_at"].type == pa.timestamp("us", tz="UTC")
    assert steps["info"].type == pa.string()  # JSON text
    task = _struct_fields(TRAJECTORY_SCHEMA.field("task").type)
    assert task["setup"].type == pa.list_(pa.field("item", pa.string(), nullable=False))
    observation = _struct_fields(TRAJECTORY_SCHEMA.field("initial_observation").type)
    attachments = _struct_fields(observation["attachments"].type)
    assert set(attachments) == {f.name for f in dataclasses.fields(Attachment)} - {"content"}


def test_schema_version_is_in_the_metadata():
    assert TRAJECTORY_SCHEMA.metadata[b"schema_version"] == str(SCHEMA_VERSION).encode()


@pytest.mark.parametrize("hint", [dict[int, str], int | str, set[str], bytes])
def test_unsupported_hints_are_rejected(hint):
    with pytest.raises(TypeError):
        field_type(hint)

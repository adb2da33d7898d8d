"""The Parquet/Arrow schema of a trajectory row, derived from the record dataclasses.

Deriving it (instead of writing it by hand) is what keeps the classes and the files from drifting:
a field added to `schemas.records` appears here with no other edit. Open-ended maps are stored as
JSON text because Arrow has no schemaless map type.
"""

from __future__ import annotations

import pyarrow as pa

from schemas.fields import BOOL, DATETIME, FLOAT, INT, JSON, LIST, RECORD, STR, FieldType, record_fields
from schemas.records import SCHEMA_VERSION, Trajectory

SCHEMA_VERSION_KEY = b"schema_version"

_SCALAR_TYPES: dict[str, pa.DataType] = {
    STR: pa.string(),
    INT: pa.int64(),
    FLOAT: pa.float64(),
    BOOL: pa.bool_(),
    DATETIME: pa.timestamp("us", tz="UTC"),
    JSON: pa.string(),
}


def arrow_type(spec: FieldType) -> pa.DataType:
    if spec.kind in _SCALAR_TYPES:
        return _SCALAR_TYPES[spec.kind]
    if spec.kind == LIST:
        assert spec.item is not None
        return pa.list_(pa.field("item", arrow_type(spec.item), nullable=spec.item.optional))
    if spec.kind == RECORD:
        assert spec.record is not None
        return pa.struct(record_arrow_fields(spec.record))
    raise TypeError(f"no Arrow type for {spec!r}")


def record_arrow_fields(cls: type) -> list[pa.Field]:
    return [pa.field(f.name, arrow_type(f.type), nullable=f.type.optional) for f in record_fields(cls)]


TRAJECTORY_SCHEMA: pa.Schema = pa.schema(
    record_arrow_fields(Trajectory), metadata={SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode()}
)

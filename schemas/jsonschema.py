"""JSON Schema (draft 2020-12) of a trajectory, derived from the record dataclasses.

It describes the *JSON form* of a row (`to_json`), meant for other languages: the Parquet row
with datetimes as ISO 8601 strings and open-ended maps as JSON objects. Parquet stores those maps
as JSON text only because Arrow has no schemaless map type; a JSON consumer should not have to
parse a string inside a document. `from_row` accepts this form as well, so it round-trips.
"""

from __future__ import annotations

import json
from typing import Any

from schemas.codec import to_row
from schemas.fields import (
    BOOL,
    DATETIME,
    FLOAT,
    INT,
    JSON,
    LIST,
    RECORD,
    STR,
    FieldType,
    all_record_types,
    record_fields,
)
from schemas.records import DOMAINS, OUTCOMES, SCHEMA_VERSION, Outcome, Trajectory

DIALECT = "https://json-schema.org/draft/2020-12/schema"

# Closed vocabularies that the type hints cannot express.
_ENUMS: dict[tuple[type, str], tuple[str, ...]] = {
    (Trajectory, "domain"): DOMAINS,
    (Outcome, "status"): OUTCOMES,
}

_SCALARS: dict[str, dict[str, Any]] = {
    STR: {"type": "string"},
    INT: {"type": "integer"},
    FLOAT: {"type": "number"},
    BOOL: {"type": "boolean"},
    DATETIME: {"type": "string", "format": "date-time"},
    JSON: {"type": "object"},
}


def _type_schema(spec: FieldType) -> dict[str, Any]:
    if spec.kind in _SCALARS:
        schema = dict(_SCALARS[spec.kind])
    elif spec.kind == LIST:
        assert spec.item is not None
        schema = {"type": "array", "items": _type_schema(spec.item)}
    else:
        assert spec.record is not None
        schema = {"$ref": f"#/$defs/{spec.record.__name__}"}
    if spec.optional:
        return {"anyOf": [schema, {"type": "null"}]}
    return schema


def _record_schema(cls: type) -> dict[str, Any]:
    properties = {}
    for f in record_fields(cls):
        schema = _type_schema(f.type)
        if (cls, f.name) in _ENUMS:
            schema["enum"] = list(_ENUMS[(cls, f.name)])
        properties[f.name] = schema
    return {
        "type": "object",
        "properties": properties,
        # Fields with defaults may be absent: documents written before they existed lack them.
        "required": [f.name for f in record_fields(cls) if f.required],
        "additionalProperties": False,
    }


def trajectory_json_schema() -> dict[str, Any]:
    definitions = {cls.__name__: _record_schema(cls) for cls in all_record_types(Trajectory)}
    root = definitions.pop("Trajectory")
    root["properties"]["schema_version"]["maximum"] = SCHEMA_VERSION
    return {
        "$schema": DIALECT,
        "$id": f"https://agentworld-data/schemas/trajectory-v{SCHEMA_VERSION}.json",
        "title": "Trajectory",
        "description": f"One agent-environment trajectory, schema_version {SCHEMA_VERSION}.",
        **root,
        "$defs": definitions,
    }


def to_json(t: Trajectory) -> dict[str, Any]:
    """The JSON form of a trajectory that `trajectory_json_schema()` describes."""
    return _jsonify_record(Trajectory, to_row(t))


def _jsonify_record(cls: type, row: dict[str, Any]) -> dict[str, Any]:
    return {f.name: _jsonify(row[f.name], f.type) for f in record_fields(cls)}


def _jsonify(value: Any, spec: FieldType) -> Any:
    if value is None:
        return None
    if spec.kind == JSON:
        return json.loads(value)
    if spec.kind == DATETIME:
        return value.isoformat()
    if spec.kind == LIST:
        assert spec.item is not None
        return [_jsonify(item, spec.item) for item in value]
    if spec.kind == RECORD:
        assert spec.record is not None
        return _jsonify_record(spec.record, value)
    return value

"""Trajectory <-> Parquet row (a dict matching `TRAJECTORY_SCHEMA`).

Rows hold nested dicts and lists, timezone-aware UTC datetimes, and JSON text for open-ended maps
(`sort_keys` so equal maps give equal bytes, which deduplication downstream relies on).
`from_row` fills fields missing from older files with the dataclass defaults: that is how a new
field with a default stays readable against every file written before it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypeVar

from schemas.fields import DATETIME, FLOAT, JSON, LIST, RECORD, FieldType, record_fields
from schemas.records import Trajectory

R = TypeVar("R")


class RowDecodeError(ValueError):
    """A row value that cannot become the record field it belongs to."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def dump_json(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)


def to_row(t: Trajectory) -> dict[str, Any]:
    """The Parquet row of a trajectory. Naive datetimes are rejected: they have no defined instant."""
    return _encode_record(t, "")


def from_row(row: dict[str, Any]) -> Trajectory:
    """The trajectory of a row; raises RowDecodeError naming the field that does not decode."""
    return _decode_record(Trajectory, row, "")


def decode_record(cls: type[R], value: Any, path: str) -> R:
    """A record of `cls` (a `schemas.records` dataclass) from its row form or its JSON form (maps as
    objects, datetimes as ISO text); RowDecodeError names the field under `path` that does not decode."""
    return _decode_record(cls, value, path)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _encode_record(record: Any, path: str) -> dict[str, Any]:
    fields = record_fields(type(record))
    return {f.name: _encode(getattr(record, f.name), f.type, _join(path, f.name)) for f in fields}


def _encode(value: Any, spec: FieldType, path: str) -> Any:
    if value is None:
        return None
    if spec.kind == JSON:
        return dump_json(value)
    if spec.kind == DATETIME:
        if value.tzinfo is None:
            raise ValueError(f"{path}: naive datetime {value.isoformat()}; use a timezone-aware one")
        return value.astimezone(UTC)
    if spec.kind == LIST:
        assert spec.item is not None
        return [_encode(item, spec.item, f"{path}[{i}]") for i, item in enumerate(value)]
    if spec.kind == RECORD:
        return _encode_record(value, path)
    return value


def _decode_record(cls: type, row: Any, path: str) -> Any:
    if not isinstance(row, dict):
        raise RowDecodeError(path or "<row>", f"expected a struct, got {type(row).__name__}")
    values = {}
    for f in record_fields(cls):
        field_path = _join(path, f.name)
        if f.name not in row:
            if f.required:
                raise RowDecodeError(field_path, "missing required field")
            values[f.name] = f.default_value()
            continue
        values[f.name] = _decode(row[f.name], f.type, field_path)
    return cls(**values)


def _decode(value: Any, spec: FieldType, path: str) -> Any:
    if value is None:
        if spec.optional:
            return None
        raise RowDecodeError(path, "null in a non-nullable field")
    if spec.kind == JSON:
        if isinstance(value, dict):  # JSON form (objects) is accepted as well as Parquet form (text)
            return value
        try:
            decoded = json.loads(value)
        except (TypeError, ValueError) as exc:
            raise RowDecodeError(path, f"invalid JSON text: {exc}") from None
        if not isinstance(decoded, dict):
            raise RowDecodeError(path, f"expected a JSON object, got {type(decoded).__name__}")
        return decoded
    if spec.kind == DATETIME:
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError as exc:
                raise RowDecodeError(path, str(exc)) from None
        if not isinstance(value, datetime):
            raise RowDecodeError(path, f"expected a timestamp, got {type(value).__name__}")
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if spec.kind == LIST:
        if not isinstance(value, list):
            raise RowDecodeError(path, f"expected a list, got {type(value).__name__}")
        assert spec.item is not None
        return [_decode(item, spec.item, f"{path}[{i}]") for i, item in enumerate(value)]
    if spec.kind == RECORD:
        return _decode_record(spec.record, value, path)
    if spec.kind == FLOAT and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value

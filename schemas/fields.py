"""Reflection over the record dataclasses: the one place that reads their type hints.

The Arrow schema, the row codec, the validator and the JSON Schema export all walk the same
`record_fields(cls)` description, so a field added to `schemas.records` reaches every one of them.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Kinds of field a record may hold. Anything else in records.py is a contract error caught at import.
STR, INT, FLOAT, BOOL, DATETIME, JSON, LIST, RECORD = (
    "str",
    "int",
    "float",
    "bool",
    "datetime",
    "json",
    "list",
    "record",
)
_SCALARS: dict[Any, str] = {str: STR, int: INT, float: FLOAT, bool: BOOL, datetime: DATETIME}


@dataclass(frozen=True)
class FieldType:
    kind: str
    optional: bool = False
    item: FieldType | None = None  # element type of a LIST
    record: type | None = None  # dataclass of a RECORD


@dataclass(frozen=True)
class RecordField:
    name: str
    type: FieldType
    default: Any = dataclasses.MISSING  # a value, or a zero-argument factory when `has_factory`
    has_factory: bool = False

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING

    def default_value(self) -> Any:
        return self.default() if self.has_factory else self.default


def field_type(hint: Any) -> FieldType:
    """Classify one type hint of a record field."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(members) != 1:
            raise TypeError(f"unsupported union {hint!r}: only `X | None` is allowed")
        return dataclasses.replace(field_type(members[0]), optional=True)
    if hint in _SCALARS:
        return FieldType(_SCALARS[hint])
    if origin is list:
        (item,) = typing.get_args(hint)
        return FieldType(LIST, item=field_type(item))
    if origin is dict:
        key, _ = typing.get_args(hint)
        if key is not str:
            raise TypeError(f"unsupported map {hint!r}: JSON objects have string keys")
        return FieldType(JSON)
    if dataclasses.is_dataclass(hint):
        return FieldType(RECORD, record=hint)
    raise TypeError(f"unsupported field type {hint!r}")


@functools.cache
def record_fields(cls: type) -> tuple[RecordField, ...]:
    """The persisted fields of a record dataclass, in declaration order (transient ones excluded)."""
    hints = typing.get_type_hints(cls)
    described = []
    for spec in dataclasses.fields(cls):
        if spec.metadata.get("transient"):
            continue
        if spec.default_factory is not dataclasses.MISSING:
            default, has_factory = spec.default_factory, True
        else:
            default, has_factory = spec.default, False
        described.append(RecordField(spec.name, field_type(hints[spec.name]), default, has_factory))
    return tuple(described)


def all_record_types(root: type) -> list[type]:
    """`root` and every dataclass reachable from it, each once, in first-seen order."""
    seen: list[type] = []

    def visit(cls: type) -> None:
        if cls in seen:
            return
        seen.append(cls)
        for spec in record_fields(cls):
            kind = spec.type.item if spec.type.kind == LIST else spec.type
            if kind is not None and kind.kind == RECORD and kind.record is not None:
                visit(kind.record)

    visit(root)
    return seen

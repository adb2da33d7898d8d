"""Checks a trajectory against the contract before it is written or after it is read.

Type checks are derived from the record type hints (like the Arrow schema); the semantic rules
(known domain, ordered steps, stored attachments, ...) are listed here. Errors name the trajectory
and the dotted path of the offending field, so a user can find it in a dataset of millions.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from typing import Any

from schemas.codec import RowDecodeError, dump_json, from_row
from schemas.fields import BOOL, DATETIME, FLOAT, INT, JSON, LIST, RECORD, STR, FieldType, record_fields
from schemas.records import DOMAINS, OUTCOMES, SCHEMA_VERSION, Attachment, Observation, Trajectory

_SHA256 = re.compile(r"[0-9a-f]{64}")


class ValidationError(ValueError):
    def __init__(self, trajectory_id: str, field: str, message: str) -> None:
        super().__init__(f"trajectory {trajectory_id!r}: {field}: {message}")
        self.trajectory_id = trajectory_id
        self.field = field
        self.message = message


def validate(t: Trajectory) -> None:
    """Raise ValidationError for the first problem found in `t`; return None when it is valid."""
    problems = _type_problems(t, FieldType(RECORD, record=Trajectory), "")
    if not problems:
        problems = _semantic_problems(t)
    if problems:
        field, message = problems[0]
        trajectory_id = t.trajectory_id if isinstance(getattr(t, "trajectory_id", None), str) else "?"
        raise ValidationError(trajectory_id, field or "<trajectory>", message)


def decode_row(row: dict[str, Any]) -> Trajectory:
    """`from_row`, with decoding problems reported as ValidationError naming trajectory and field."""
    try:
        return from_row(row)
    except RowDecodeError as exc:
        raw_id = row.get("trajectory_id") if isinstance(row, dict) else None
        raise ValidationError(raw_id if isinstance(raw_id, str) else "?", exc.field, exc.message) from None


def validate_row(row: dict[str, Any]) -> Trajectory:
    """Decode a Parquet row and validate it; decoding problems become ValidationError too."""
    trajectory = decode_row(row)
    validate(trajectory)
    return trajectory


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _type_problems(value: Any, spec: FieldType, path: str) -> list[tuple[str, str]]:
    if value is None:
        return [] if spec.optional else [(path, "is None but the field is not optional")]
    got = type(value).__name__
    if spec.kind == STR and not isinstance(value, str):
        return [(path, f"expected str, got {got}")]
    if spec.kind == INT and (not isinstance(value, int) or isinstance(value, bool)):
        return [(path, f"expected int, got {got}")]
    if spec.kind == BOOL and not isinstance(value, bool):
        return [(path, f"expected bool, got {got}")]
    if spec.kind == FLOAT:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return [(path, f"expected float, got {got}")]
        if not math.isfinite(value):
            return [(path, f"must be finite, got {value}")]
    if spec.kind == DATETIME:
        if not isinstance(value, datetime):
            return [(path, f"expected datetime, got {got}")]
        if value.tzinfo is None:
            return [(path, "datetime must be timezone-aware (UTC)")]
    if spec.kind == JSON:
        return _json_problems(value, path)
    if spec.kind == LIST:
        if not isinstance(value, list):
            return [(path, f"expected list, got {got}")]
        assert spec.item is not None
        return [p for i, item in enumerate(value) for p in _type_problems(item, spec.item, f"{path}[{i}]")]
    if spec.kind == RECORD:
        assert spec.record is not None
        if not isinstance(value, spec.record):
            return [(path, f"expected {spec.record.__name__}, got {got}")]
        return [
            problem
            for f in record_fields(spec.record)
            for problem in _type_problems(getattr(value, f.name), f.type, _join(path, f.name))
        ]
    return []


def _json_problems(value: Any, path: str) -> list[tuple[str, str]]:
    if not isinstance(value, dict):
        return [(path, f"expected dict, got {type(value).__name__}")]
    try:
        text = dump_json(value)
    except (TypeError, ValueError) as exc:
        return [(path, f"not JSON-serialisable: {exc}")]
    # Tuples, non-string keys and the like serialise but come back different: reject them now,
    # not after a round trip through Parquet has silently changed the data.
    if json.loads(text) != value:
        return [(path, "does not survive a JSON round trip (tuples or non-string keys?)")]
    return []


def _semantic_problems(t: Trajectory) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if not 1 <= t.schema_version <= SCHEMA_VERSION:
        problems.append(("schema_version", f"{t.schema_version} is not in 1..{SCHEMA_VERSION}"))
    if not t.trajectory_id.strip():
        problems.append(("trajectory_id", "must not be empty"))
    if t.domain not in DOMAINS:
        problems.append(("domain", f"{t.domain!r} is not one of {', '.join(DOMAINS)}"))
    if t.outcome.status not in OUTCOMES:
        problems.append(("outcome.status", f"{t.outcome.status!r} is not one of {', '.join(OUTCOMES)}"))
    problems += _tool_problems(t)
    problems += _reward_problems(t)
    problems += _observation_problems(t.initial_observation, "initial_observation")
    for position, step in enumerate(t.steps):
        path = f"steps[{position}]"
        if step.index != position:
            problems.append((f"{path}.index", f"is {step.index}, expected {position} (steps must be 0..n-1)"))
        if step.latency_s < 0:
            problems.append((f"{path}.latency_s", f"must be >= 0, got {step.latency_s}"))
        problems += _observation_problems(step.observation, f"{path}.observation")
    return problems


def _reward_problems(t: Trajectory) -> list[tuple[str, str]]:
    problems = []
    verification = t.outcome.verification
    rewards = [("outcome.reward", t.outcome.reward)]
    if verification is not None:
        rewards.append(("outcome.verification.reward", verification.reward))
        if t.outcome.reward != verification.reward:
            problems.append(("outcome.reward", "differs from outcome.verification.reward"))
    for path, value in rewards:
        if value is not None and not 0.0 <= value <= 1.0:
            problems.append((path, f"must be in [0, 1], got {value}"))
    return problems


def _tool_problems(t: Trajectory) -> list[tuple[str, str]]:
    problems = []
    seen: set[str] = set()
    for i, tool in enumerate(t.environment.tools):
        path = f"environment.tools[{i}]"
        if not tool.name.strip():
            problems.append((f"{path}.name", "must not be empty"))
        elif tool.name in seen:
            problems.append((f"{path}.name", f"{tool.name!r} is listed twice"))
        seen.add(tool.name)
        problems += _json_problems(tool.input_schema, f"{path}.input_schema")
        if tool.output_schema is not None:
            problems += _json_problems(tool.output_schema, f"{path}.output_schema")
    return problems


def _observation_problems(observation: Observation, path: str) -> list[tuple[str, str]]:
    problems = []
    for i, attachment in enumerate(observation.attachments):
        problems += _attachment_problems(attachment, f"{path}.attachments[{i}]")
    return problems


def _attachment_problems(attachment: Attachment, path: str) -> list[tuple[str, str]]:
    if attachment.content is not None:
        if not isinstance(attachment.content, bytes):
            return [(f"{path}.content", f"expected bytes, got {type(attachment.content).__name__}")]
        return []  # not stored yet: the writer fills sha256, size and uri
    if not _SHA256.fullmatch(attachment.sha256):
        return [(f"{path}.sha256", "a stored attachment needs its 64-hex-digit sha256")]
    if not attachment.uri:
        return [(f"{path}.uri", "a stored attachment needs its uri")]
    if attachment.size < 0:
        return [(f"{path}.size", f"must be >= 0, got {attachment.size}")]
    return []

"""ATIF steps as both readers of `collectors.importers.atif` use them: parsed and checked.

The fields are those of harbor 0.25.0's models (`harbor/models/trajectories/step.py`, `tool_call.py`,
`observation_result.py`, `content.py`); a value the readers need and cannot use is a `BadRow` that
says which step and field.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fsspec.core import url_to_fs

from collectors.importers import reading
from collectors.importers.base import BadRow, require
from collectors.importers.chat_messages import tool_definitions
from schemas.atif import EXTRA_KEY
from schemas.records import Attachment, ToolDefinition

SOURCES = ("system", "user", "agent")


@dataclass
class Call:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Result:
    call_id: str | None
    text: str  # its text parts, joined by line breaks
    # Its image (and audio) parts: (path, media_type, where), read by `media_file` when mapped (our
    # own files list their attachments in extra, and are read from there).
    media: list[tuple[Any, Any, str]] = field(default_factory=list)


@dataclass
class AtifStep:
    """One ATIF step, checked: what both readers use."""

    step_id: int
    source: str
    message: str  # its text parts, joined by line breaks
    timestamp: datetime | None
    calls: list[Call]
    results: list[Result]
    raw: dict[str, Any]

    def ours(self) -> dict[str, Any] | None:
        extra = self.raw.get("extra")
        value = extra.get(EXTRA_KEY) if isinstance(extra, dict) else None
        return value if isinstance(value, dict) else None


def parse_step(raw: Any, position: int) -> AtifStep:
    """steps[position] of a file, checked; BadRow says what is wrong with it."""
    where = f" of steps[{position}]"
    step_id = require(raw, "step_id", int, where)
    if step_id != position + 1:
        raise BadRow(f"steps[{position}].step_id is {step_id}; ATIF step ids count 1, 2, ... in order")
    where = f" of step {step_id}"
    source = require(raw, "source", str, where)
    if source not in SOURCES:
        raise BadRow(f"step {step_id}: source {source!r} is not one of {', '.join(SOURCES)}")
    # A message is the agent's or the user's, not the environment's: its images are not imported.
    message, _ = _content(raw.get("message", ""), f"the message of step {step_id}")
    calls = []
    for n, call in enumerate(raw.get("tool_calls") or []):
        where = f" of tool_calls[{n}] of step {step_id}"
        name = require(call, "function_name", str, where)
        if not name:
            raise BadRow(f"tool_calls[{n}] of step {step_id} has an empty function_name")
        calls.append(
            Call(require(call, "tool_call_id", str, where), name, require(call, "arguments", dict, where))
        )
    ids = {call.call_id for call in calls}
    results = []
    observation = raw.get("observation")
    if observation is not None:
        for n, result in enumerate(
            require(observation, "results", list, f" of the observation of step {step_id}")
        ):
            if not isinstance(result, dict):
                raise BadRow(
                    f"observation.results[{n}] of step {step_id} is a {type(result).__name__}, not an object"
                )
            call_id = result.get("source_call_id")
            if call_id is not None and call_id not in ids:
                raise BadRow(
                    f"step {step_id}: an observation result answers call {call_id!r}, "
                    "which the step does not make"
                )
            text, media = _content(result.get("content"), f"observation.results[{n}] of step {step_id}")
            results.append(Result(call_id, text, media))
    return AtifStep(step_id, source, message, _timestamp(raw.get("timestamp"), step_id), calls, results, raw)


def _content(content: Any, where: str) -> tuple[str, list[tuple[Any, Any, str]]]:
    """(text, media) of a message or a result: a string, or a list of content parts (ATIF 1.6)."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise BadRow(f"{where} should be a string or a list of content parts, got {type(content).__name__}")
    texts, media = [], []
    for n, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in ("image", "audio") and isinstance(part.get("source"), dict):
            source = part["source"]
            media.append((source.get("path"), source.get("media_type"), f"{where}, part {n}"))
        else:
            raise BadRow(f"{where}: part {n} is not a text, image or audio content part")
    return "\n".join(texts), media


def media_file(uri: str, path: Any, media_type: Any, where: str, name: str = "") -> Attachment:
    """An image (or audio) file a trajectory names, read into an attachment. Only a relative path
    inside the trajectory's own folder is read: a file elsewhere on this machine, or a URL, is not
    something an import should fetch on a document's say-so."""
    if not isinstance(path, str) or not path or not isinstance(media_type, str) or not media_type:
        raise BadRow(f"{where}: a media part needs a source with a path and a media_type")
    parts = path.split("/")
    if "://" in path or path.startswith("/") or ".." in parts or "\\" in path:
        raise BadRow(
            f"{where}: {path!r} is not a relative path inside the trajectory's folder, so it is not read"
        )
    target = posixpath.join(posixpath.dirname(uri), path)
    fs, local = url_to_fs(target)
    try:
        with fs.open(local, "rb") as handle:
            content = handle.read(reading.MAX_ROW_BYTES + 1)
    except OSError as exc:
        raise BadRow(f"{where}: cannot read {path!r}: {exc}") from None
    if len(content) > reading.MAX_ROW_BYTES:
        raise BadRow(f"{where}: {path!r} is over the {reading.MAX_ROW_BYTES:,}-byte limit")
    return Attachment(name=name or posixpath.basename(path), media_type=media_type, content=content)


def _timestamp(value: Any, step_id: int) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRow(f"step {step_id}: timestamp should be ISO 8601 text, got {type(value).__name__}")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadRow(f"step {step_id}: timestamp {value!r} is not ISO 8601: {exc}") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def tools_of(agent: dict[str, Any], output_schemas: dict[str, Any] | None = None) -> list[ToolDefinition]:
    tools = tool_definitions(agent.get("tool_definitions"), "agent.tool_definitions")
    for tool in tools:
        schema = (output_schemas or {}).get(tool.name)
        tool.output_schema = schema if isinstance(schema, dict) else None
    return tools

"""ATIF `trajectory.json` files (Harbor's Agent Trajectory Interchange Format) into our trajectories.

The format: the pydantic models of the `harbor` package 0.25.0 (`harbor/models/trajectories/`, "ATIF",
RFC 0001); `schemas.atif` names the versions and writes the same format. One file is one trajectory:
a folder is searched for files named `trajectory.json` (Harbor keeps one per trial, at
`<trial>/agent/trajectory.json`; its continuation and subagent files have other names and are not
read); a file or a glob is read as named. Versions 1.0 to 1.8 are read (one model validates them all).

Two kinds of file:
- Written by `python -m schemas export-atif` (the root's `extra.agentworld` says so): read back into
  the trajectory it was written from: actions, observations (attachments from the files beside it),
  step times, latencies, rewards, info, task, environment, policy and outcome. Only the trajectory id
  and the provenance are the import's own (the id keys resume; `provenance.source.row_id` is the
  file's path, which holds the original id).
- Any other producer (Harbor's agents): mapped by `collectors.importers.atif_harbor`.

What makes a file a dead letter: not JSON, not an object, an unknown `schema_version`, no steps,
`step_id`s that do not count 1, 2, ..., a step `source` other than system/user/agent, a tool call
without an id, a function name or object arguments, a result naming a call its step does not make,
an image that is not a file inside the trajectory's own folder (or cannot be read), and for our own
files a step without its `extra.agentworld`.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fsspec.core import url_to_fs

from collectors.importers import reading
from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from collectors.importers.chat_messages import tool_definitions
from collectors.importers.swe_agent_traj import relative_name
from schemas.atif import EXTRA_KEY, FILE_NAME, VERSIONS_READ, action_of_calls
from schemas.codec import RowDecodeError, decode_record
from schemas.records import (
    DOMAINS,
    Action,
    Attachment,
    Environment,
    Observation,
    Outcome,
    Policy,
    Provenance,
    Task,
    ToolDefinition,
)

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
    media: list[Attachment] = field(default_factory=list)  # its image (and audio) parts, read


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


class AtifImporter(Importer):
    name = "atif"
    dataset = "harbor-atif"  # no single public dataset: pass --dataset with your runs' name
    license = ""
    summary = "Harbor's ATIF trajectory.json files (1.0-1.8): Harbor runs, or our export-atif output"

    def read(self, source: str) -> Iterator[SourceRow]:
        for uri in _trajectory_files(source):
            for found, content in reading.file_records(uri, (".json",)):
                yield SourceRow(row_id=relative_name(source, found), data=content, uri=found)

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        document = _document(row.data)
        version = document.get("schema_version")
        if version not in VERSIONS_READ:
            raise BadRow(
                f"schema_version {version!r} is not an ATIF version read here ({', '.join(VERSIONS_READ)})"
            )
        agent = require(document, "agent", dict)
        raw_steps = require(document, "steps", list)
        if not raw_steps:
            raise BadRow("field 'steps' is empty: ATIF requires at least one step")
        steps = [_step(raw, position, row.uri) for position, raw in enumerate(raw_steps)]
        extra = document.get("extra")
        ours = extra.get(EXTRA_KEY) if isinstance(extra, dict) else None
        if ours is not None:
            return _our_episode(document, agent, steps, ours, row.uri)
        from collectors.importers.atif_harbor import harbor_episode  # only other producers' files need it

        return harbor_episode(document, agent, steps, row, context)


def _trajectory_files(source: str) -> list[str]:
    """The files to read: in a folder those named trajectory.json, else what `source` names."""
    fs, path = url_to_fs(source)
    files = reading.data_files(source, (".json",))
    if not set("*?[") & set(path) and fs.isdir(path):
        files = [uri for uri in files if posixpath.basename(uri) == FILE_NAME]
        if not files:
            raise reading.InputError(f"{source} holds no {FILE_NAME} file")
    return files


def _document(content: bytes | Any) -> dict[str, Any]:
    try:
        text = content.decode(json.detect_encoding(content))
    except UnicodeDecodeError as exc:
        raise BadRow(f"the file is not text in the encoding it starts with: {exc}") from None
    document = reading.parse_json(text, "the file", BadRow)
    if not isinstance(document, dict):
        raise BadRow(f"the file holds a JSON {type(document).__name__}, not an ATIF trajectory object")
    return document


def _step(raw: Any, position: int, uri: str) -> AtifStep:
    where = f" of steps[{position}]"
    step_id = require(raw, "step_id", int, where)
    if step_id != position + 1:
        raise BadRow(f"steps[{position}].step_id is {step_id}; ATIF step ids count 1, 2, ... in order")
    where = f" of step {step_id}"
    source = require(raw, "source", str, where)
    if source not in SOURCES:
        raise BadRow(f"step {step_id}: source {source!r} is not one of {', '.join(SOURCES)}")
    message, media = _content(raw.get("message", ""), f"the message of step {step_id}", uri)
    if media:
        raise BadRow(f"step {step_id}: images in a message are not imported (only in observations)")
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
            text, media = _content(result.get("content"), f"observation.results[{n}] of step {step_id}", uri)
            results.append(Result(call_id, text, media))
    return AtifStep(step_id, source, message, _timestamp(raw.get("timestamp"), step_id), calls, results, raw)


def _content(content: Any, where: str, uri: str) -> tuple[str, list[Attachment]]:
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
            media.append(media_file(uri, source.get("path"), source.get("media_type"), f"{where}, part {n}"))
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


# Our own files (schemas.atif): every field comes back.


def _our_episode(
    document: dict[str, Any], agent: dict[str, Any], steps: list[AtifStep], ours: Any, uri: str
) -> Episode:
    if not isinstance(ours, dict):
        raise BadRow(f"extra.{EXTRA_KEY} should be an object, got {type(ours).__name__}")
    domain = require(ours, "domain", str, f" of extra.{EXTRA_KEY}")
    if domain not in DOMAINS:
        raise BadRow(f"extra.{EXTRA_KEY}.domain {domain!r} is not one of {', '.join(DOMAINS)}")
    first, rest = steps[0], steps[1:]
    if first.source != "user" or len(first.results) != 1:
        raise BadRow("step 1 of our export should be the task (source user) with the first observation")
    agent_extra = agent.get("extra")
    config = agent_extra.get(EXTRA_KEY, {}).get("config", {}) if isinstance(agent_extra, dict) else {}
    name = require(agent, "name", str, " of the agent")
    try:
        task = decode_record(Task, {**_object(ours, "task"), "instruction": first.message}, "task")
        environment = decode_record(Environment, {**_object(ours, "environment"), "tools": []}, "environment")
        outcome = decode_record(Outcome, _object(ours, "outcome"), "outcome")
        policy = decode_record(Policy, {"name": name, "config": config}, "policy")
        started = decode_record(Provenance, _object(ours, "provenance"), "provenance").started_at
        turns = [_our_turn(domain, step, uri) for step in rest]
        initial = _our_observation(first, uri)
    except RowDecodeError as exc:
        raise BadRow(f"extra.{EXTRA_KEY}: {exc}") from None
    return Episode(
        domain=domain,
        task=task,
        initial=initial,
        turns=turns,
        environment=environment,
        policy=policy,
        outcome=outcome,
        started_at=started,
        tools=tools_of(agent, ours.get("tool_output_schemas")),
    )


def _object(ours: dict[str, Any], key: str) -> dict[str, Any]:
    return require(ours, key, dict, f" of extra.{EXTRA_KEY}")


def _our_turn(domain: str, step: AtifStep, uri: str) -> Turn:
    ours = step.ours()
    if step.source != "agent" or ours is None:
        raise BadRow(
            f"step {step.step_id} should be an agent step with extra.{EXTRA_KEY}, as our export writes"
        )
    if "action" in ours:
        action = decode_record(Action, {**_object(ours, "action"), "text": step.message}, "action")
    else:
        found = action_of_calls(domain, [(call.name, call.arguments) for call in step.calls])
        if found is None:
            raise BadRow(
                f"step {step.step_id}: its tool calls are not one {domain} action, and it names none"
            )
        action = Action(kind=found[0], arguments=found[1], text=step.message)
    if step.timestamp is None:
        raise BadRow(f"step {step.step_id} has no timestamp, which our export always writes")
    return Turn(
        action=action,
        observation=_our_observation(step, uri),
        reward=ours.get("reward"),
        info=ours.get("info", {}),
        started_at=step.timestamp,
        latency_s=ours.get("latency_s", 0.0),
        done=ours.get("done", False),
    )


def _our_observation(step: AtifStep, uri: str) -> Observation:
    ours = step.ours() or {}
    described = ours.get("observation")
    if not isinstance(described, dict) or len(step.results) != 1:
        raise BadRow(
            f"step {step.step_id} should have one observation result and extra.{EXTRA_KEY}.observation"
        )
    attachments = []
    for n, entry in enumerate(described.get("attachments", [])):
        where = f"step {step.step_id}, attachment {n}"
        if not isinstance(entry, dict):
            raise BadRow(f"{where}: should be an object")
        name = entry.get("name")
        attachment = media_file(
            uri, entry.get("path"), entry.get("media_type"), where, name if isinstance(name, str) else ""
        )
        if hashlib.sha256(attachment.content or b"").hexdigest() != entry.get("sha256"):
            raise BadRow(f"{where}: {entry.get('path')!r} does not match its sha256")
        attachments.append(attachment)
    return Observation(
        format=require(described, "format", str, f" of step {step.step_id}'s observation"),
        text=step.results[0].text,
        data=described.get("data", {}),
        attachments=attachments,
    )


IMPORTER = AtifImporter()

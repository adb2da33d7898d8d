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
Both read the steps as `collectors.importers.atif_steps` parses and checks them.

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
from typing import Any

from fsspec.core import url_to_fs

from collectors.importers import reading
from collectors.importers.atif_harbor import harbor_episode
from collectors.importers.atif_steps import AtifStep, media_file, parse_step, tools_of
from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from collectors.importers.swe_agent_traj import relative_name
from schemas.atif import EXTRA_KEY, FILE_NAME, VERSIONS_READ, action_of_calls
from schemas.codec import RowDecodeError, decode_record
from schemas.records import (
    DOMAINS,
    Action,
    Environment,
    Observation,
    Outcome,
    Policy,
    Provenance,
    Task,
)


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
        steps = [parse_step(raw, position) for position, raw in enumerate(raw_steps)]
        extra = document.get("extra")
        ours = extra.get(EXTRA_KEY) if isinstance(extra, dict) else None
        if ours is not None:
            return _our_episode(document, agent, steps, ours, row.uri)
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
    policy_extra = agent_extra.get(EXTRA_KEY) if isinstance(agent_extra, dict) else None
    config = policy_extra.get("config", {}) if isinstance(policy_extra, dict) else {}
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

"""Our trajectories as ATIF, Harbor's Agent Trajectory Interchange Format (`trajectory.json`).

The format is that of the pydantic models in the `harbor` package 0.25.0 (`harbor/models/trajectories/`,
"ATIF", RFC 0001), read for their fields and for the version each field came in: 1.6 added content
parts (text and images) for messages and observation results; 1.7 added the document's own
`trajectory_id`, `extra` on tool calls and observation results, and `llm_call_count`; 1.8 added audio
parts. One pydantic model validates every version, 1.0 to 1.8. Nothing here imports harbor (it lives
in its own Python 3.12 venv); the tests validate what this module writes with harbor's models.

The mapping (the README's table says it for users):
- the root: `session_id` (and `trajectory_id` from 1.7) is our trajectory id; `agent` is the policy
  (name; `version` the collector's version; `model_name` its config's `model`; `tool_definitions` the
  environment's tools in OpenAI's function form); `final_metrics.total_steps` counts the ATIF steps.
- step 1 (`source: "user"`): the task's instruction as the message and our initial observation as its
  observation.
- each of our steps, one `source: "agent"` step: the action's text as the message, the action as
  tool calls (`tool_calls` below), its observation as one observation result (the text, and the image
  attachments as image content parts), `timestamp` its start.
- what ATIF has no field for goes under the key `agentworld` of the `extra` objects: at the root the
  domain, environment, task (but the instruction), outcome, provenance and tools' output schemas; in
  the agent the policy's config; in each step the observation's format, data and attachments, the
  step's latency, reward, done flag and info, and the action itself when its tool calls do not give it
  back. So a file read back (`collectors.importers.atif`) gives the trajectory it was written from.
ATIF has no reward or outcome field (Harbor keeps rewards in the trial's result.json) and our
records hold no token counts, so no step has `metrics`.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas.atomic import atomic_write
from schemas.attachments import AttachmentStore, StorageError
from schemas.domains import ATIF_CALL_AS_TOOL, ATIF_CALL_PER_KEYSTROKE, ATIF_CALL_PER_KIND, find_record
from schemas.invalid_actions import INVALID
from schemas.records import SCHEMA_VERSION, Action, Attachment, Observation, Step, Trajectory
from schemas.storage import read_trajectories

VERSIONS_WRITTEN = ("ATIF-v1.6", "ATIF-v1.7")
DEFAULT_VERSION = "ATIF-v1.7"
VERSIONS_READ = tuple(f"ATIF-v1.{minor}" for minor in range(9))  # those harbor 0.25.0's model accepts
EXTRA_KEY = "agentworld"  # our fields inside each ATIF `extra` object
FILE_NAME = "trajectory.json"  # Harbor's name; a trial folder keeps it at agent/trajectory.json
MEDIA_DIR = "attachments"  # beside trajectory.json: the blobs its steps refer to
# Terminus 2, Harbor's own terminal agent (harbor/agents/terminus_2/terminus_2.py), records each item
# of a keystrokes batch as a call of `bash_command` {"keystrokes", "duration"} (our keystrokes items
# exactly) and the end of its task as a call of `mark_task_complete`.
TERMINAL_TOOL = "bash_command"
TASK_COMPLETE_TOOL = "mark_task_complete"
# The media types of ATIF image content parts (harbor/models/trajectories/content.py), with the file
# extension the copied blob gets so viewers recognise it.
IMAGE_TYPES = {"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp"}

Call = tuple[str, dict[str, Any]]  # (function_name, arguments)


def atif_calls(domain: str) -> str:
    """How the domain's actions become ATIF tool calls: its record's `atif_calls` (one of the ATIF_CALL_
    ways of schemas.domains), one call per action named by its kind for a name of no domain."""
    record = find_record(domain)
    return record.atif_calls if record is not None else ATIF_CALL_PER_KIND


def tool_calls_of(domain: str, action: Action) -> list[Call]:
    """The ATIF tool calls an action becomes, by its domain's `atif_calls`: keystrokes one
    `bash_command` per item (as Terminus 2 writes them), a tool call the tool's own name and arguments,
    an invalid action none (the agent's reply was no action), any other action one call named by its
    kind."""
    if action.kind == INVALID:
        return []
    arguments = action.arguments
    way = atif_calls(domain)
    if (
        way == ATIF_CALL_PER_KEYSTROKE
        and action.kind == "keystrokes"
        and isinstance(arguments.get("keystrokes"), list)
    ):
        items = arguments["keystrokes"]
        if items and all(isinstance(item, dict) for item in items):
            return [(TERMINAL_TOOL, dict(item)) for item in items]
    if way == ATIF_CALL_AS_TOOL and action.kind == "tool_call" and isinstance(arguments.get("name"), str):
        call_arguments = arguments.get("arguments", {})
        if isinstance(call_arguments, dict):
            return [(arguments["name"], call_arguments)]
    return [(action.kind, arguments)]


def action_of_calls(domain: str, calls: list[Call]) -> tuple[str, dict[str, Any]] | None:
    """(kind, arguments) of the action that `calls` are, the inverse of `tool_calls_of`; None where
    they are not one action (no call, or several that are not one keystrokes batch)."""
    way = atif_calls(domain)
    if way == ATIF_CALL_PER_KEYSTROKE and calls and all(name == TERMINAL_TOOL for name, _ in calls):
        return "keystrokes", {"keystrokes": [arguments for _, arguments in calls]}
    if len(calls) != 1:
        return None
    name, arguments = calls[0]
    if way == ATIF_CALL_AS_TOOL:
        return "tool_call", {"name": name, "arguments": arguments}
    return name, arguments


def media_path(attachment: Attachment) -> str:
    """Where an attachment's blob is copied, relative to trajectory.json: named by its content."""
    return f"{MEDIA_DIR}/{attachment.sha256}{IMAGE_TYPES.get(attachment.media_type, '')}"


def to_atif(t: Trajectory, version: str = DEFAULT_VERSION) -> dict[str, Any]:
    """The ATIF document of a stored trajectory (its attachments have their sha256); see the module doc.
    The blobs are expected at `media_path` beside the file (`export_dataset` copies them there)."""
    if version not in VERSIONS_WRITTEN:
        raise ValueError(f"ATIF version {version!r} is not written; choose {' or '.join(VERSIONS_WRITTEN)}")
    steps = [_task_step(t), *(_agent_step(t.domain, step) for step in t.steps)]
    document: dict[str, Any] = {"schema_version": version, "session_id": t.trajectory_id}
    if version != "ATIF-v1.6":
        document["trajectory_id"] = t.trajectory_id
    document["agent"] = _agent(t)
    document["steps"] = steps
    document["notes"] = (
        f"Exported from an agentworld {t.domain} trajectory: step 1 is the task and the first observation, "
        f"each later step one action and the observation it brought; extra.{EXTRA_KEY} holds the fields "
        "ATIF has none for."
    )
    document["final_metrics"] = {"total_steps": len(steps)}
    document["extra"] = {EXTRA_KEY: _root_extra(t)}
    return document


def _agent(t: Trajectory) -> dict[str, Any]:
    agent: dict[str, Any] = {"name": t.policy.name, "version": t.provenance.collector_version}
    model = t.policy.config.get("model")
    if isinstance(model, str) and model:
        agent["model_name"] = model
    if t.environment.tools:
        agent["tool_definitions"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                },
            }
            for tool in t.environment.tools
        ]
    agent["extra"] = {EXTRA_KEY: {"config": t.policy.config}}
    return agent


def _root_extra(t: Trajectory) -> dict[str, Any]:
    environment = plain(t.environment)
    del environment["tools"]  # in agent.tool_definitions, but for their output schemas (below)
    task = plain(t.task)
    del task["instruction"]  # step 1's message
    extra: dict[str, Any] = {
        "records_version": SCHEMA_VERSION,
        "domain": t.domain,
        "environment": environment,
        "task": task,
        "outcome": plain(t.outcome),
        "provenance": plain(t.provenance),
    }
    outputs = {
        tool.name: tool.output_schema for tool in t.environment.tools if tool.output_schema is not None
    }
    if outputs:
        extra["tool_output_schemas"] = outputs
    return extra


def _task_step(t: Trajectory) -> dict[str, Any]:
    return {
        "step_id": 1,
        "timestamp": t.provenance.started_at.isoformat(),
        "source": "user",
        "message": t.task.instruction,
        "observation": {"results": [_result(t.initial_observation, None)]},
        "extra": {EXTRA_KEY: {"observation": _observation_extra(t.initial_observation)}},
    }


def _agent_step(domain: str, step: Step) -> dict[str, Any]:
    calls = tool_calls_of(domain, step.action)
    ids = [
        f"call_{step.index + 1}" if len(calls) == 1 else f"call_{step.index + 1}_{n + 1}"
        for n in range(len(calls))
    ]
    ours: dict[str, Any] = {"latency_s": step.latency_s, "observation": _observation_extra(step.observation)}
    if action_of_calls(domain, calls) != (step.action.kind, step.action.arguments):
        ours["action"] = {"kind": step.action.kind, "arguments": step.action.arguments}
    if step.reward is not None:
        ours["reward"] = step.reward
    if step.done:
        ours["done"] = True
    if step.info:
        ours["info"] = step.info
    atif: dict[str, Any] = {
        "step_id": step.index + 2,
        "timestamp": step.started_at.isoformat(),
        "source": "agent",
        "message": step.action.text,
    }
    if calls:
        atif["tool_calls"] = [
            {"tool_call_id": call_id, "function_name": name, "arguments": arguments}
            for call_id, (name, arguments) in zip(ids, calls, strict=True)
        ]
    # A batch of keystrokes has one output between them all: like Terminus 2, the result names no call.
    atif["observation"] = {"results": [_result(step.observation, ids[0] if len(ids) == 1 else None)]}
    atif["extra"] = {EXTRA_KEY: ours}
    return atif


def _result(observation: Observation, call_id: str | None) -> dict[str, Any]:
    images = [a for a in observation.attachments if a.media_type in IMAGE_TYPES]
    content: str | list[dict[str, Any]] = observation.text
    if images:  # the text first: Harbor's text-only readers take a list's first part
        content = [{"type": "text", "text": observation.text}]
        content += [
            {"type": "image", "source": {"media_type": a.media_type, "path": media_path(a)}} for a in images
        ]
    result: dict[str, Any] = {} if call_id is None else {"source_call_id": call_id}
    result["content"] = content
    return result


def _observation_extra(observation: Observation) -> dict[str, Any]:
    extra: dict[str, Any] = {"format": observation.format}
    if observation.data:
        extra["data"] = observation.data
    if observation.attachments:
        extra["attachments"] = [
            {
                "name": a.name,
                "media_type": a.media_type,
                "sha256": a.sha256,
                "size": a.size,
                "path": media_path(a),
            }
            for a in observation.attachments
        ]
    return extra


def plain(record: Any) -> Any:
    """A record as JSON values (datetimes in ISO 8601), without transient fields (attachment bytes)."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {
            f.name: plain(getattr(record, f.name))
            for f in dataclasses.fields(record)
            if not f.metadata.get("transient")
        }
    if isinstance(record, datetime):
        return record.isoformat()
    if isinstance(record, list):
        return [plain(item) for item in record]
    return record


@dataclass
class ExportSummary:
    out: str
    written: int = 0
    steps: int = 0
    attachments: int = 0  # files written: a blob two observations share is one
    skipped: dict[str, str] = field(default_factory=dict)  # trajectory id -> why it was not written

    def format_text(self) -> str:
        lines = [
            f"wrote {self.written:,} ATIF trajectories ({self.steps:,} steps, {self.attachments:,} "
            f"attachment files) under {self.out}"
        ]
        if self.skipped:
            lines.append(f"  not written: {len(self.skipped):,}")
            lines += [f"  {tid}: {reason}" for tid, reason in list(self.skipped.items())[:10]]
        return "\n".join(lines)


def export_dataset(path: str, out: str, version: str = DEFAULT_VERSION) -> ExportSummary:
    """Every trajectory under `path` (a dataset root, a Parquet file or a glob) as
    OUT/<trajectory id>/agent/trajectory.json, Harbor's trial layout, with its attachments beside it.
    A trajectory that cannot be written (an attachment missing from the dataset, a value JSON cannot
    hold) is skipped with its reason; the others are written."""
    if version not in VERSIONS_WRITTEN:
        raise ValueError(f"ATIF version {version!r} is not written; choose {' or '.join(VERSIONS_WRITTEN)}")
    summary = ExportSummary(out=out)
    store = AttachmentStore(dataset_root(path))
    for t in read_trajectories(path):
        folder = posixpath.join(out, folder_name(t.trajectory_id), "agent")
        try:
            text = json.dumps(to_atif(t, version), ensure_ascii=False, indent=2, allow_nan=False) + "\n"
            blobs = {media_path(a): store.get(a) for a in _attachments(t)}
        except (ValueError, StorageError) as exc:
            summary.skipped[t.trajectory_id] = str(exc)
            continue
        for relative, blob in blobs.items():
            atomic_write(posixpath.join(folder, relative), blob)
        atomic_write(posixpath.join(folder, FILE_NAME), text.encode())
        summary.written += 1
        summary.steps += len(t.steps) + 1
        summary.attachments += len(blobs)
    return summary


def _attachments(t: Trajectory) -> Iterator[Attachment]:
    for observation in [t.initial_observation, *(step.observation for step in t.steps)]:
        yield from observation.attachments


_SHARD_DIR = re.compile(r"shard-\d+-of-\d+")


def dataset_root(path: str) -> str:
    """The dataset root of `path`, where its attachments are stored: `path` itself, or for a file or
    glob under `domain=X/`, the folder above (above a shard sub-root too: it stores in the root)."""
    head, marker, _ = path.partition("/domain=")
    if not marker:
        return path
    parent, name = posixpath.split(head)
    return parent if _SHARD_DIR.fullmatch(name) else head


def folder_name(trajectory_id: str) -> str:
    """A trajectory id as one safe folder name (ids are ours: letters, digits, `-`, `_`, `.`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", trajectory_id).lstrip(".") or "_"

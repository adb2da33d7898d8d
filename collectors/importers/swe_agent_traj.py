"""SWE-agent's own `.traj` files (one run per file) into swe trajectories.

Source: SWE-agent's documentation of its output files, https://swe-agent.com/latest/usage/trajectories/
(and github.com/SWE-agent/SWE-agent, `sweagent/types.py`). A `.traj` file is one JSON object:
`trajectory`, a list of steps, each with `response` (the model's output), `thought`, `action`,
`observation`, `state` (the open file and working directory: a dict, or its JSON text in older
versions), `execution_time` and `query` (`messages` before 1.1); `history`, the chat shown to the
model (messages with `role`, `content`, and in 0.x `is_demo` for demonstrations); `info` with
`exit_status`, `submission` (the final patch) and `model_stats`; since 1.0 `replay_config`, the
run's configuration as JSON text (its `agent.model.name` names the model).

Mapping (collectors/importers/swe_common.py): each step is one turn. SWE-agent 1.x writes editor
calls as command lines (`str_replace_editor view PATH --view_range 1 20`): they become `read` /
`edit` as for OpenHands. Every other action is a SWE-agent command: `bash` as written, the window
commands of 0.x (open, goto, scroll_up, scroll_down) `read` of the lines shown. The thought goes to
the step's `info["thought"]`, the state to `info["state"]`. The task instruction is the first user
message of `history` that is not a demonstration; the repository root is the directory its prompt
shows, else `<uploaded_files>`, else the first step's working directory.
Observations keep their text, with 1.x's terminal line ends (CRLF) as LF. The task id is the
instance of 1.x's `replay_config.problem_statement.id`, else the file's name.
A `.traj` holds no test verdict: the outcome is `completed` without reward, and `exit_status`,
`submission` and `model_stats` go to task.metadata. Not mapped: `query`/`messages` (the model's
input, which the steps already hold) and `execution_time` (the driver's steps carry no timing).
A file that is not JSON, or has no `trajectory` list, goes to the dead-letter file.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from typing import Any

from fsspec.core import url_to_fs

from collectors.importers import reading, swe_common
from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from schemas.records import Task

_ROOT = re.compile(r"<uploaded_files>\s*\n(?P<root>[^\n]+)\n\s*</uploaded_files>")


class SweAgentTrajImporter(Importer):
    name = "swe_agent_traj"
    dataset = "swe-agent-traj"
    license = ""
    summary = "SWE-agent's own .traj files, one run per file (set --dataset and --license for your runs)"

    def read(self, source: str) -> Iterator[SourceRow]:
        for uri, content in reading.file_records(source, (".traj",)):
            yield SourceRow(row_id=relative_name(source, uri), data=content, uri=uri)

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        try:
            # json.loads(bytes) would guess the encoding the same way; decoding first lets the depth
            # limit of `reading.loads` look at the text before the parser recurses into it.
            text = row.data.decode(json.detect_encoding(row.data))
        except UnicodeDecodeError as exc:
            raise BadRow(f"the file is not text in the encoding it starts with: {exc}") from None
        data = reading.parse_json(text, "the file", BadRow)
        if not isinstance(data, dict):
            raise BadRow(f"the file holds a JSON {type(data).__name__}, not a .traj object")
        steps = require(data, "trajectory", list)
        history = data.get("history") if isinstance(data.get("history"), list) else []
        info = data.get("info") if isinstance(data.get("info"), dict) else {}
        instruction, root = _instruction(history)
        turns = []
        for position, step in enumerate(steps):
            if not isinstance(step, dict):
                raise BadRow(f"trajectory[{position}] is a {type(step).__name__}, not a step object")
            state = _state(step.get("state"))
            root = root or state.get("working_dir", "")
            turns.append(_turn(step, state, root))
        if not turns:
            raise BadRow("the trajectory has no steps")
        replay = _replay_config(data.get("replay_config"))
        task_id = _instance_id(replay) or posixpath.splitext(posixpath.basename(row.row_id))[0]
        metadata: dict[str, Any] = {
            "instance_id": task_id,
            "exit_status": info.get("exit_status") or "",
            "submission": info.get("submission") or "",
            "model_stats": info.get("model_stats") or {},
        }
        model = _model_name(replay)
        return swe_common.episode(
            Task(id=task_id, instruction=instruction, metadata=metadata),
            root,
            turns,
            agent="SWE-agent",
            run={"model": model},
            agent_version=info.get("swe_agent_version") or "",
            agent_system_prompt=next(
                (swe_common.message_text(m.get("content")) for m in history if _role(m) == "system"), ""
            ),
        )


def relative_name(source: str, uri: str) -> str:
    """The file's path below the folder (or glob) the user named: stable across runs, and unique
    where runs keep one `<instance_id>.traj` per folder."""
    fs, base = url_to_fs(source)
    globbed = bool(set("*?[") & set(base))
    if globbed:
        base = posixpath.dirname(re.split(r"[*?\[]", base, maxsplit=1)[0])
    elif not fs.isdir(base):
        base = posixpath.dirname(base)
    path = url_to_fs(uri)[1]
    base = base.rstrip("/")
    if base and path.startswith(base + "/"):
        return path[len(base) + 1 :]
    return reading.display_name(uri)


def _role(message: Any) -> str:
    return message.get("role", "") if isinstance(message, dict) else ""


def _instruction(history: list[Any]) -> tuple[str, str]:
    """The task as the agent got it (the first user message not part of a demonstration), and the
    repository root that message shows."""
    for message in history:
        if (
            _role(message) != "user"
            or message.get("is_demo")
            or message.get("message_type") == "demonstration"
        ):
            continue
        text, state = swe_common.strip_state(swe_common.message_text(message.get("content")))
        found = _ROOT.search(text)
        return text, state.get("working_dir") or (found["root"].strip() if found else "")
    return "", ""


def _state(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return {"raw": value}
    return value if isinstance(value, dict) else {}


def _turn(step: dict[str, Any], state: dict[str, Any], root: str) -> Turn:
    action = step.get("action")
    observation = step.get("observation")
    # SWE-agent 1.x runs commands in a terminal, which ends lines with CRLF; the programs wrote LF
    # (what our sandbox's bash shows). A lone CR (a progress bar's) is the program's and stays.
    output = observation.replace("\r\n", "\n") if isinstance(observation, str) else ""
    output, shown = swe_common.strip_state(output)
    info: dict[str, Any] = {"state": state or shown}
    if isinstance(step.get("thought"), str) and step["thought"].strip():
        info["thought"] = step["thought"].strip()
    if not isinstance(action, str) or not action.strip():
        return swe_common.invalid_turn("the step has no action", output, **info)
    arguments = swe_common.editor_arguments_from_command_line(action.strip())
    if arguments is not None:
        return swe_common.editor_turn(arguments, output, root, **info)
    return swe_common.swe_agent_turn(action.strip(), output, root, **info)


def _replay_config(value: Any) -> dict[str, Any]:
    """SWE-agent 1.x's replay configuration (an object, or its JSON text), {} where there is none."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _model_name(replay: dict[str, Any]) -> str:
    """`agent.model.name` of the replay configuration, "" where there is none."""
    agent = replay.get("agent")
    model = agent.get("model") if isinstance(agent, dict) else None
    return str(model.get("name") or "") if isinstance(model, dict) else ""


def _instance_id(replay: dict[str, Any]) -> str:
    """`problem_statement.id` of the replay configuration (the SWE-bench instance), "" where none."""
    statement = replay.get("problem_statement")
    found = statement.get("id") if isinstance(statement, dict) else None
    return found if isinstance(found, str) else ""


IMPORTER = SweAgentTrajImporter()

"""OpenHands' own event stream: the tool calls of one run, read from its events.

Source: OpenHands (github.com/OpenHands/OpenHands, MIT outside enterprise/): a run's history is a
list of serialized events (`openhands/events/serialization`, the types in
`openhands/core/schema/action.py` and `observation.py`). Each has `id`, `timestamp`, `source`
(`user`, `agent`, `environment`) and either `action` with `args`, or `observation` with `content`,
`extras` and `cause` (the id of the action it answers). An action the LLM chose by function calling
carries `tool_call_metadata`: `function_name`, `tool_call_id` and the `model_response`, whose
`choices[0].message.tool_calls` hold the call's original JSON arguments. The GUI's "download
trajectory" and the runtime tests' fixtures (`tests/runtime/trajs/*.json`) are this list; the
evaluation harness writes it as the `history` field of each `output.jsonl` row.

What is read (the openhands importer maps the calls to our swe tools):
- the environment actions (`run`, `run_ipython`, `read`, `write`, `edit`, `browse`,
  `browse_interactive`, `call_tool_mcp`), each paired with the observation whose `cause` is its id
  (else the one with its tool call id). The call is the LLM's own (name and arguments from
  `tool_call_metadata`) where recorded, else rebuilt from the action's `args` under the OpenHands
  tool that issues it (`run` -> execute_bash, `read`/`write`/`edit` with a `command` ->
  str_replace_editor). What the agent was shown: a `run`'s `content` with its exit code from
  `extras.metadata.exit_code` (older events: `extras.exit_code`); an `edit`'s
  `extras.formatted_output_and_error` (the editor's answer; `content` is OpenHands' own diff);
  any other observation's `content`.
- the first user `message` is the task; later ones are `[user] ...` thoughts. Agent `message`s,
  `think` actions and an action's own `args.thought` join the next call's thought. `system`
  gives the system prompt. `finish` gives the final message (`final_thought`, else `thought`,
  else the event's `message`).
Not read: agent state changes, recalls, condensations and other bookkeeping events; timestamps
(OpenHands writes local time without a zone); token usage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from collectors.importers.base import BadRow

# The actions that ask the environment for something, and the OpenHands tool that issues each.
ENVIRONMENT_ACTIONS = {
    "run": "execute_bash",
    "run_ipython": "execute_ipython_cell",
    "read": "str_replace_editor",
    "write": "str_replace_editor",
    "edit": "str_replace_editor",
    "browse": "browser",
    "browse_interactive": "browser",
    "call_tool_mcp": "mcp",
}
MAX_EVENTS = 100_000  # one history held whole; real runs have hundreds
_EDITOR_KEYS = ("command", "path", "file_text", "old_str", "new_str", "insert_line", "view_range")


def is_event(row: Any) -> bool:
    """Whether a row is one OpenHands event (not a whole run)."""
    return (
        isinstance(row, dict)
        and "messages" not in row
        and "history" not in row
        and isinstance(row.get("source"), str)
        and ("action" in row or "observation" in row)
    )


@dataclass
class History:
    """One file's events, gathered while its rows stream by. `problem`: why it cannot be trusted."""

    uri: str
    first_index: int
    events: list[Any] = field(default_factory=list)
    problem: str = ""

    def add(self, event: Any) -> None:
        if len(self.events) >= MAX_EVENTS:
            self.problem = f"the history has over {MAX_EVENTS:,} events; its rest was not read"
        else:
            self.events.append(event)


@dataclass
class EventCall:
    """A tool call and what the agent was shown. `exit_status`: a bash command's, None if not known."""

    name: str
    arguments: dict[str, Any]
    thought: str
    output: str = ""
    exit_status: int | None = None
    shell: dict[str, str] = field(default_factory=dict)
    action_id: Any = None
    tool_call_id: str = ""


@dataclass
class EventRun:
    system_prompt: str = ""
    instruction: str | None = None
    calls: list[EventCall] = field(default_factory=list)  # answered, in order
    unanswered: list[EventCall] = field(default_factory=list)
    final_message: str | None = None
    closing_thoughts: list[str] = field(default_factory=list)  # said after the last call
    model: str = ""


def read_events(events: list[Any]) -> EventRun:
    """The calls of a run from its events; BadRow where an event is not an object."""
    run = EventRun()
    pending: list[EventCall] = []
    thoughts: list[str] = []
    for position, event in enumerate(events):
        if not isinstance(event, dict):
            raise BadRow(f"event {position} is a {type(event).__name__}, not an object")
        args = _object(event.get("args"))
        kind = event.get("action")
        if kind in ENVIRONMENT_ACTIONS:
            call = _call(event, kind, args)
            call.thought = "\n\n".join(t for t in (*thoughts, _text(args.get("thought"))) if t)
            thoughts = []
            pending.append(call)
            run.model = run.model or _model(event)
        elif kind == "message":
            text = _text(args.get("content")) or _text(event.get("message"))
            if event.get("source") == "user" and run.instruction is None:
                run.instruction = text
            elif event.get("source") == "user":
                thoughts.append(f"[user] {text}")
            elif text:
                thoughts.append(text)
        elif kind == "think":
            thoughts.append(_text(args.get("thought")))
        elif kind == "system":
            run.system_prompt = _text(args.get("content")) or _text(event.get("message"))
        elif kind == "finish":
            run.final_message = (
                _text(args.get("final_thought")) or _text(args.get("thought")) or _text(event.get("message"))
            )
        elif "observation" in event:
            call = _answered(pending, event)
            if call is not None:
                _observe(call, event)
                run.calls.append(call)
    run.unanswered = pending
    run.closing_thoughts = [t for t in thoughts if t]
    return run


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _object(value: Any) -> dict[str, Any]:
    """`value` where it is an object, else an empty one: a field of the wrong type reads as absent."""
    return value if isinstance(value, dict) else {}


def _model(event: dict[str, Any]) -> str:
    return _text(_object(_object(event.get("tool_call_metadata")).get("model_response")).get("model"))


def _call(event: dict[str, Any], kind: str, args: dict[str, Any]) -> EventCall:
    """The LLM's own call where the event kept it, else the call the action's args stand for."""
    metadata = _object(event.get("tool_call_metadata"))
    if function := _text(metadata.get("function_name")):
        call_id = _text(metadata.get("tool_call_id"))
        arguments = _recorded_arguments(metadata, call_id)
        if arguments is not None:
            return EventCall(function, arguments, "", action_id=event.get("id"), tool_call_id=call_id)
    tool = ENVIRONMENT_ACTIONS[kind]
    if kind == "run":
        arguments = {"command": args.get("command")}
    elif kind == "run_ipython":
        arguments = {"code": args.get("code")}
    elif kind == "read":
        arguments = {"command": "view", "path": args.get("path")}
        if args.get("view_range"):
            arguments["view_range"] = args["view_range"]
    elif kind == "write":
        arguments = {"command": "create", "path": args.get("path"), "file_text": args.get("content")}
    elif kind == "edit" and args.get("command"):
        arguments = {key: args[key] for key in _EDITOR_KEYS if args.get(key) not in (None, "")}
    elif kind == "edit":  # OpenHands' LLM-based editor: a draft of the file, merged by a model
        tool, arguments = "edit_file", {"path": args.get("path"), "content": args.get("content")}
    elif kind == "call_tool_mcp":
        tool, arguments = _text(args.get("name")) or tool, {"arguments": args.get("arguments")}
    else:
        arguments = {key: value for key, value in args.items() if key not in ("thought", "security_risk")}
    return EventCall(tool, arguments, "", action_id=event.get("id"))


def _recorded_arguments(metadata: dict[str, Any], call_id: str) -> dict[str, Any] | None:
    """The JSON arguments of the tool call `call_id` in the model response, or None."""
    choices = _object(metadata.get("model_response")).get("choices")
    message = _object(choices[0]).get("message") if isinstance(choices, list) and choices else None
    calls = _object(message).get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict) or call.get("id") != call_id:
            continue
        arguments = _object(call.get("function")).get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return None
        return arguments if isinstance(arguments, dict) else None
    return None


def _answered(pending: list[EventCall], observation: dict[str, Any]) -> EventCall | None:
    """The pending call an observation answers: by `cause`, else by tool call id."""
    cause = observation.get("cause")
    call_id = _text(_object(observation.get("tool_call_metadata")).get("tool_call_id"))
    for index, call in enumerate(pending):
        if (cause is not None and call.action_id == cause) or (
            cause is None and call_id and call.tool_call_id == call_id
        ):
            return pending.pop(index)
    return None


def _observe(call: EventCall, observation: dict[str, Any]) -> None:
    extras = _object(observation.get("extras"))
    content = _text(observation.get("content"))
    kind = observation.get("observation")
    if kind == "edit":
        call.output = _text(extras.get("formatted_output_and_error")) or content
        return
    call.output = content
    if kind != "run":
        return
    metadata = _object(extras.get("metadata"))
    code = metadata.get("exit_code", extras.get("exit_code"))
    if isinstance(code, int) and not isinstance(code, bool) and code >= 0:  # -1: still running
        call.exit_status = code
    shell = {"cwd": metadata.get("working_dir"), "python": metadata.get("py_interpreter_path")}
    call.shell = {key: value for key, value in shell.items() if isinstance(value, str) and value}

"""SWE actions as data: the three tools `read`, `edit` and `bash`, their JSON Schemas (recorded in
`Environment.tools`) and the parser that validates an action and renders its python-call text,
e.g. `read(path='src/a.py', start_line=3)`.

A malformed action (unknown tool, a missing or mistyped argument, an argument the command does not
take) raises InvalidActionError. Arguments that are well-formed but wrong for the repository (a
missing file, an old_str that is not there) are not malformed: the tool answers with the error.
"""

from __future__ import annotations

from typing import Any

from sandboxes.base import InvalidActionError
from sandboxes.swe.config import MAX_TIMEOUT_S
from schemas.records import Action, ToolDefinition

READ = "read"
EDIT = "edit"
BASH = "bash"
ACTION_KINDS = (READ, EDIT, BASH)
EDIT_COMMANDS = ("str_replace", "create", "insert")

_PATH = {"type": "string", "description": "Path relative to the repository root (or absolute inside it)."}

TOOLS = [
    ToolDefinition(
        name=READ,
        description=(
            "Read a file with line numbers (cat -n style), optionally only lines start_line..end_line "
            "(1-based, inclusive), or list a directory (one entry a line, directories ending in /)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "path": _PATH,
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    ToolDefinition(
        name=EDIT,
        description=(
            "Edit a file. str_replace: replace old_str, which must occur exactly once, by new_str. "
            "create: write a new file with file_text (refused if the path exists). insert: insert "
            "new_str after line insert_line (0 inserts at the top). Answers with the unified diff of "
            "the change, or the exact error."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string", "enum": list(EDIT_COMMANDS)},
                "path": _PATH,
                "old_str": {"type": "string"},
                "new_str": {"type": "string"},
                "file_text": {"type": "string"},
                "insert_line": {"type": "integer", "minimum": 0},
            },
            "required": ["command", "path"],
            "additionalProperties": False,
        },
    ),
    ToolDefinition(
        name=BASH,
        description=(
            "Run a bash command from the repository root, without network. Answers with its output "
            "(stdout and stderr interleaved, long output cut in the middle with a marker) and a last "
            "line [exit status: N] or [timed out after N s]."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_S},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    ),
]
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}

# Which arguments each edit command takes, and which of them it needs.
_EDIT_ARGS: dict[str, tuple[set[str], set[str]]] = {
    "str_replace": ({"command", "path", "old_str", "new_str"}, {"old_str"}),
    "create": ({"command", "path", "file_text"}, {"file_text"}),
    "insert": ({"command", "path", "new_str", "insert_line"}, {"new_str", "insert_line"}),
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_types(kind: str, arguments: dict[str, Any]) -> None:
    properties = TOOLS_BY_NAME[kind].input_schema["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise InvalidActionError(f"{kind}: unknown argument(s) {unknown}; it takes {list(properties)}")
    for name, value in arguments.items():
        schema = properties[name]
        if schema["type"] == "string" and not isinstance(value, str):
            raise InvalidActionError(f"{kind}: {name} must be a string, got {type(value).__name__}")
        if schema["type"] == "integer":
            if not _is_int(value):
                raise InvalidActionError(f"{kind}: {name} must be an integer, got {value!r}")
            if not schema.get("minimum", value) <= value <= schema.get("maximum", value):
                bounds = f">= {schema['minimum']}" + (
                    f" and <= {schema['maximum']}" if "maximum" in schema else ""
                )
                raise InvalidActionError(f"{kind}: {name} must be {bounds}, got {value}")
    missing = [name for name in TOOLS_BY_NAME[kind].input_schema["required"] if name not in arguments]
    if missing:
        raise InvalidActionError(f"{kind}: missing required argument(s) {missing}")


def _check_edit(arguments: dict[str, Any]) -> None:
    command = arguments["command"]
    if command not in _EDIT_ARGS:
        raise InvalidActionError(f"edit: command must be one of {list(EDIT_COMMANDS)}, got {command!r}")
    allowed, needed = _EDIT_ARGS[command]
    extra = sorted(set(arguments) - allowed)
    if extra:
        raise InvalidActionError(f"edit {command}: does not take {extra}")
    missing = sorted(needed - set(arguments))
    if missing:
        raise InvalidActionError(f"edit {command}: missing required argument(s) {missing}")
    if command == "str_replace" and not arguments["old_str"]:
        raise InvalidActionError("edit str_replace: old_str must not be empty")


def action_text(kind: str, arguments: dict[str, Any]) -> str:
    """The python-call form shown to a world model: the arguments given, in the schema's order."""
    order = list(TOOLS_BY_NAME[kind].input_schema["properties"])
    shown = ", ".join(f"{name}={arguments[name]!r}" for name in order if name in arguments)
    return f"{kind}({shown})"


def parse_action(kind: str, arguments: dict[str, Any]) -> Action:
    """Validate one tool call; raise InvalidActionError saying what is malformed."""
    if kind not in TOOLS_BY_NAME:
        raise InvalidActionError(f"unknown SWE tool {kind!r}; the tools are {list(ACTION_KINDS)}")
    if not isinstance(arguments, dict):
        raise InvalidActionError(f"{kind} arguments must be an object, got {type(arguments).__name__}")
    # An agent's JSON often spells an omitted optional argument as null.
    clean = {name: value for name, value in arguments.items() if value is not None}
    _check_types(kind, clean)
    if kind == EDIT:
        _check_edit(clean)
    if (
        kind == READ
        and "start_line" in clean
        and "end_line" in clean
        and clean["end_line"] < clean["start_line"]
    ):
        raise InvalidActionError(
            f"read: end_line {clean['end_line']} is before start_line {clean['start_line']}"
        )
    if kind == BASH and not clean["command"].strip():
        raise InvalidActionError("bash: command must not be empty")
    if "path" in clean and not clean["path"].strip():
        raise InvalidActionError(f"{kind}: path must not be empty")
    return Action(kind=kind, arguments=clean, text=action_text(kind, clean))


def read_action(path: str, start_line: int | None = None, end_line: int | None = None) -> Action:
    return parse_action(READ, {"path": path, "start_line": start_line, "end_line": end_line})


def edit_action(command: str, path: str, **arguments: Any) -> Action:
    return parse_action(EDIT, {"command": command, "path": path, **arguments})


def bash_action(command: str, timeout_s: int | None = None) -> Action:
    return parse_action(BASH, {"command": command, "timeout_s": timeout_s})

"""MCP actions (one JSON tool call) and observations (the result as the client receives it).

Only a malformed call is an InvalidActionError. An unknown tool or arguments that break the tool's
schema are sent as they are: what the server answers is the observation a world model must learn.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from sandboxes.base import InvalidActionError
from schemas.records import Action, Observation, ToolDefinition

TOOL_CALL = "tool_call"
MCP_RESULT = "mcp_result"
ACTION_SPACE = (
    "Call one of the server's tools per turn, as a JSON object:\n"
    '{"action": "tool_call", "name": "<tool name>", "arguments": {<the tool\'s arguments>}}\n'
    "The tools and their input schemas are listed above. The observation is the tool's result as JSON "
    '(its "content" items, "structuredContent" when the tool gives one, and "isError"), or an "error" '
    'object with a "code" and a "message" for a protocol error or a timeout.'
)


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def parse_action(kind: str, arguments: dict[str, Any]) -> Action:
    """A validated tool_call Action with its canonical text; InvalidActionError when malformed."""
    if kind != TOOL_CALL:
        raise InvalidActionError(f"unknown MCP action kind {kind!r}; the only kind is {TOOL_CALL!r}")
    if not isinstance(arguments, dict):
        raise InvalidActionError("a tool_call's arguments must be an object {name, arguments}")
    unknown = sorted(set(arguments) - {"name", "arguments"})
    if unknown:
        raise InvalidActionError(f"a tool_call takes only 'name' and 'arguments', not {unknown}")
    name = arguments.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidActionError("a tool_call needs 'name': the tool's name as a non-empty string")
    call_args = arguments.get("arguments", {})
    if not isinstance(call_args, dict):
        raise InvalidActionError(
            f"a tool_call's 'arguments' must be an object, not {type(call_args).__name__}"
        )
    try:
        text = tool_call_text(name, call_args)
    except (TypeError, ValueError) as exc:
        raise InvalidActionError(f"a tool_call's arguments must be JSON: {exc}") from None
    return Action(kind=TOOL_CALL, arguments={"name": name, "arguments": call_args}, text=text)


def tool_definition(tool: types.Tool) -> ToolDefinition:
    return ToolDefinition(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema),
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
    )


def _canonical(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, indent=2)


def _data(
    server: str, tool: str, is_error: bool, error: dict[str, Any] | None, structured: Any
) -> dict[str, Any]:
    return {
        "server": server,
        "tool": tool,
        "is_error": is_error,
        "error": error,
        "structured_content": structured,
    }


def result_observation(server: str, tool: str, result: types.CallToolResult) -> Observation:
    payload: dict[str, Any] = {
        "content": [item.model_dump(by_alias=True, exclude_none=True, mode="json") for item in result.content]
    }
    structured = result.structured_content
    if structured is not None:
        payload["structuredContent"] = structured
    payload["isError"] = bool(result.is_error)
    data = _data(server, tool, bool(result.is_error), None, structured)
    return Observation(format=MCP_RESULT, text=_canonical(payload), data=data)


def error_observation(server: str, tool: str, code: int | str, message: str) -> Observation:
    """A JSON-RPC error (int code), a timeout ("timeout") or a result the client rejected."""
    error = {"code": code, "message": message}
    return Observation(
        format=MCP_RESULT, text=_canonical({"error": error}), data=_data(server, tool, True, error, None)
    )


def server_exit_observation(
    server: str, tool: str, message: str, status: dict[str, Any], stderr_tail: str
) -> Observation:
    """The call failed because the server exited (or closed its connection): how, and its last stderr."""
    error = {
        "code": "server_exited",
        "message": message,
        "exit_code": status["exit_code"],
        "signal": status["signal"],
        "stderr_tail": stderr_tail,
    }
    return Observation(
        format=MCP_RESULT, text=_canonical({"error": error}), data=_data(server, tool, True, error, None)
    )


def timeout_observation(server: str, tool: str, timeout_s: float) -> Observation:
    return error_observation(server, tool, "timeout", f"no answer within {timeout_s:g} s")


def initial_observation(
    server: str, name: str, version: str, tools: list[str], site: str = ""
) -> Observation:
    text = f"Connected to {name} {version}: {len(tools)} tools ({', '.join(tools)})."
    data: dict[str, Any] = {"server": server, "tools": tools}
    if site:
        data["site"] = site
    return Observation(format=MCP_RESULT, text=text, data=data)

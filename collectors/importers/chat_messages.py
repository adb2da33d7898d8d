"""OpenAI-style chat messages into tool exchanges (a call and its result), for `openai_chat` and `toucan`.

The message format is OpenAI Chat Completions (https://platform.openai.com/docs/api-reference/chat/create):
an assistant message carries `tool_calls`, each `{"id", "type": "function", "function": {"name",
"arguments"}}` with `arguments` a JSON string; each result is a `role: "tool"` message with
`tool_call_id` and `content` (a string, or a list of `{"type": "text", "text"}` parts). The older form
that `tool_calls` replaced is read too: an assistant `function_call` `{"name", "arguments"}` answered by
a `role: "function"` message with `name` and `content`. Toucan-1.5M stores its trajectories in that
older form (the message format of Qwen-Agent, which generated most of them).

Pairing: a `tool` result goes to the call with its `tool_call_id`; a `function` result (which has no
id) to the earliest unanswered call of its name, else the earliest unanswered call. Several calls in
one message are several exchanges, in the order they were made. A call that never got a result is
only acceptable at the end of the log (the conversation was cut short: the importer marks the
trajectory `truncated` and keeps the answered calls); a missing result followed by answered calls
would leave the world model a history with a hole in it, so that row is a `BadRow`. A final call to a
tool that ends the episode (`finish`, for the importers that name one) expects no result: see
`truncation`.

User replies as results (`user_replies=True`, for logs whose user is a simulator that the
environment runs, as in tau-bench): an assistant message with text and no call that a user message
answers is a call to `respond` {"content": the text} (tau-bench's own name for that action,
`RESPOND_ACTION_NAME` in its tau_bench/types.py), and the user's message is its result. Without the
flag, user messages after the first are kept as they are in `user_messages`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from collectors.importers.base import BadRow
from sandboxes.mcp.actions import MCP_RESULT
from schemas.records import Observation, Outcome, ToolDefinition


@dataclass
class ToolExchange:
    """One tool call and what came back: `result` holds the text parts, None when nothing came back."""

    name: str
    arguments: dict[str, Any]
    call_id: str
    message_index: int  # where the call was made, for error messages and step info
    user_turn: int  # how many user messages came before the call, minus one (0: the first request)
    result: list[str] | None = None


RESPOND = "respond"  # the agent's message to a simulated user, as a call (see the module doc)


@dataclass
class Conversation:
    exchanges: list[ToolExchange]  # the answered calls, in the order they were made
    unanswered: list[ToolExchange]  # calls at the end of the log that never got a result
    user_messages: list[str] = field(default_factory=list)  # with user_replies: only the first
    system_messages: list[str] = field(default_factory=list)


def json_value(value: Any, what: str, kind: type | tuple[type, ...]) -> Any:
    """`value`, or the JSON it holds when it is a string (the Hub stores nested columns as JSON text)."""
    if isinstance(value, str) and not (kind is str or (isinstance(kind, tuple) and str in kind)):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise BadRow(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, kind):
        names = "/".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise BadRow(f"{what} should be {names}, got {type(value).__name__}")
    return value


def call_arguments(raw: Any, where: str) -> dict[str, Any]:
    """A call's arguments as an object: the JSON string the API sends, or an object already parsed."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    value = json_value(raw, f"the arguments of {where}", dict)
    return value


def content_parts(content: Any, where: str) -> list[str]:
    """A message's content as text parts: a string is one part; a list gives its text parts."""
    if content is None:
        return [""]
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise BadRow(f"{where}: a content part of type {kind!r} is not text; only text is imported")
        return parts
    raise BadRow(f"{where}: content should be a string or a list of text parts, got {type(content).__name__}")


def text_of(content: Any, where: str) -> str:
    return "\n\n".join(content_parts(content, where))


def parse_conversation(messages: list[Any], user_replies: bool = False) -> Conversation:
    """The tool exchanges of a chat log; see the module doc for the pairing rules and `user_replies`."""
    calls: list[ToolExchange] = []
    pending: list[ToolExchange] = []
    users: list[str] = []
    systems: list[str] = []
    said = 0  # user messages so far: a call's user_turn is this minus one
    reply: ToolExchange | None = None  # the last message, when it was the agent's text to the user
    for index, message in enumerate(messages):
        where = f"message {index}"
        if not isinstance(message, dict):
            raise BadRow(f"{where} should be an object with a 'role', got {type(message).__name__}")
        role = message.get("role")
        last_reply, reply = reply, None
        if role == "user":
            text = text_of(message.get("content"), where)
            said += 1
            if last_reply is not None:
                last_reply.result = [text]
                calls.append(last_reply)
            else:
                users.append(text)
        elif role == "assistant":
            made = _calls_of(message, index, max(said - 1, 0))
            calls += made
            pending += made
            if user_replies and not made and said:
                content = text_of(message.get("content"), where)
                reply = ToolExchange(RESPOND, {"content": content}, "", index, said - 1)
        elif role in ("tool", "function"):
            exchange = _answered_call(message, role, pending, where)
            exchange.result = content_parts(message.get("content"), where)
            pending.remove(exchange)
        elif role in ("system", "developer"):
            try:
                systems.append(text_of(message.get("content"), where))
            except BadRow:  # an instruction with non-text parts: the steps do not need it
                pass
        else:
            raise BadRow(
                f"{where} has role {role!r}; expected system, developer, user, assistant, tool or function"
            )
    answered = [call for call in calls if call.result is not None]
    unanswered = [call for call in calls if call.result is None]
    if unanswered and answered and calls.index(unanswered[0]) < calls.index(answered[-1]):
        gap = unanswered[0]
        raise BadRow(
            f"the call to {gap.name!r} in message {gap.message_index} has no result, but later calls do: "
            "the history before them would be missing a step"
        )
    return Conversation(answered, unanswered, users, systems)


def _calls_of(message: dict[str, Any], index: int, user_turn: int) -> list[ToolExchange]:
    made = []
    tool_calls = message.get("tool_calls") or []
    if not isinstance(tool_calls, list):
        raise BadRow(f"message {index}: tool_calls should be a list, got {type(tool_calls).__name__}")
    for position, call in enumerate(tool_calls):
        where = f"tool call {position} of message {index}"
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or not function["name"]
        ):
            raise BadRow(f"{where} needs function.name (a non-empty string)")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise BadRow(f"{where} needs an 'id' for its result's tool_call_id to name")
        arguments = call_arguments(function.get("arguments"), f"{where} ({function['name']})")
        made.append(ToolExchange(function["name"], arguments, call_id, index, user_turn))
    legacy = message.get("function_call")
    if legacy is not None:
        where = f"the function_call of message {index}"
        if not isinstance(legacy, dict) or not isinstance(legacy.get("name"), str) or not legacy["name"]:
            raise BadRow(f"{where} needs a 'name' (a non-empty string)")
        call_id = legacy.get("call_id") or legacy.get("id") or ""
        arguments = call_arguments(legacy.get("arguments"), f"{where} ({legacy['name']})")
        made.append(ToolExchange(legacy["name"], arguments, str(call_id), index, user_turn))
    return made


def _answered_call(
    message: dict[str, Any], role: str, pending: list[ToolExchange], where: str
) -> ToolExchange:
    if not pending:
        raise BadRow(f"{where} is a {role} result, but no call is waiting for one")
    call_id = message.get("tool_call_id")
    if role == "tool" and call_id:
        for call in pending:
            if call.call_id == call_id:
                return call
        raise BadRow(f"{where} answers tool_call_id {call_id!r}, which no unanswered call has")
    name = message.get("name")
    return next((call for call in pending if call.name == name), pending[0])


def tool_definitions(tools: Any, what: str = "tools") -> list[ToolDefinition]:
    """Tool definitions from the API's `tools` ([{"type": "function", "function": {name, description,
    parameters}}]) or a flat list of {name, description, parameters | input_schema}. A name listed
    twice keeps its first definition (the schema allows each name once)."""
    if tools is None or tools == "":
        return []
    listed = json_value(tools, what, list)
    found: dict[str, ToolDefinition] = {}
    for position, tool in enumerate(listed):
        spec = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
            raise BadRow(f"{what}[{position}] needs a name (as function.name or name)")
        schema = spec.get("parameters", spec.get("input_schema")) or {}
        if not isinstance(schema, dict):
            raise BadRow(
                f"{what}[{position}] ({spec['name']}): its parameters should be a JSON Schema object"
            )
        description = spec.get("description") or ""
        found.setdefault(spec["name"], ToolDefinition(spec["name"], str(description), schema))
    return list(found.values())


def mcp_result(server: str, tool: str, parts: list[str]) -> Observation:
    """A tool result in the form of our MCP sandbox's observations (sandboxes.mcp.actions): each text
    part one `content` item. Chat logs do not record MCP's `isError`, but our form requires the flag,
    so the text says false and `data["is_error"]` says None: not recorded."""
    payload = {"content": [{"type": "text", "text": part} for part in parts], "isError": False}
    data = {
        "server": server,
        "tool": tool,
        "is_error": None,
        "error": None,
        "structured_content": None,
    }
    return Observation(format=MCP_RESULT, text=json.dumps(payload, ensure_ascii=False, indent=2), data=data)


def unnamed_server_initial(tools: list[str]) -> Observation:
    """Our MCP sandbox's first observation (`Connected to <server> <version>: ...`) where the log does
    not name its server: what is known, the tools, in the same shape."""
    text = f"Connected to an MCP server (not named in the source): {len(tools)} tools ({', '.join(tools)})."
    return Observation(format=MCP_RESULT, text=text, data={"server": "", "tools": tools})


def step_info(exchange: ToolExchange) -> dict[str, Any]:
    info: dict[str, Any] = {"user_turn": exchange.user_turn, "message_index": exchange.message_index}
    if exchange.call_id:
        info["tool_call_id"] = exchange.call_id
    return info


def listed_tools(row: dict[str, Any]) -> tuple[str, Any]:
    """(field, value) of a row's tool list: `tools` (the API's name) or `available_tools` (Toucan's,
    and other datasets'); ("", None) when it has neither."""
    for key in ("tools", "available_tools"):
        if row.get(key) not in (None, "", []):
            return key, row[key]
    return "", None


def truncation(conversation: Conversation, finish_tools: tuple[str, ...] = ()) -> Outcome:
    """`completed`, or `truncated` when calls at the end of the log never got their result. A single
    last call to one of `finish_tools` is the agent ending the episode, which no result answers."""
    unanswered = conversation.unanswered
    if not unanswered or (len(unanswered) == 1 and unanswered[0].name in finish_tools):
        return Outcome(status="completed")
    names = ", ".join(call.name for call in unanswered)
    return Outcome(
        status="truncated",
        error=f"the log ends with {len(unanswered)} tool call(s) that got no result: {names}",
        error_kind="no_tool_result",
    )

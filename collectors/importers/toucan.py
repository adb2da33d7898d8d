"""Toucan-1.5M (Agent-Ark/Toucan-1.5M): MCP tool-use trajectories into mcp trajectories.

Source: the dataset card, https://huggingface.co/datasets/Agent-Ark/Toucan-1.5M (Apache-2.0), and
the generating pipeline, https://github.com/TheAgentArk/Toucan (its datagen/ and
data/ms_swift_format_converter.ipynb).
Parquet, one folder per generating model (configs `Kimi-K2`, `OSS`, `Qwen3`, and `SFT`), every
column a string: `uuid`, `subset_name`, `question`, `target_tools` (comma-separated, `Server::tool`
in multi-server rows), `messages` (JSON), `available_tools` (JSON, OpenAI `tools` form; `tools` in
the SFT config), `question_quality_assessment` and `response_quality_assessment` (JSON: per dimension
a reasoning and a score), and `metadata` (JSON: `mcp_servers`, each with `server_name` and
`remote_server_response.tools`, the MCP tool definitions as the server listed them; and
`synthetic_data_gen_configs`, the pipeline's steps with their model and parameters).

`messages` are in the older OpenAI form: an assistant `function_call` {name, arguments (JSON text)}
answered by a `role: "function"` message {name, content} (see `chat_messages`). Qwen-Agent runs
(Kimi-K2, Qwen3) name tools `<server name, lower case, spaces as dashes>-<tool>`; OpenAI-Agents
runs (OSS) use the tool's own name. Here an action names the tool as its MCP server does, as our
MCP sandbox would; where two of a row's servers have a tool of the same name, the prefixed name is
kept so the calls stay distinct.

Published rows also come in other shapes, all read: `target_tools` as a JSON list; an assessment
written as prose, not JSON (kept as `task.metadata["question_quality_text"]` /
`["response_quality_text"]`); `mcp_servers` without `remote_server_response` (then the tools are
the row's `available_tools`, each given to the server whose prefix its name carries).

Mapping: the tools -> `environment.tools` (name, description, input_schema); each call -> our
tool-call action `{"name", "arguments"}`; its result -> our MCP result JSON (the text the framework
passed on, as one text item; `isError` is not recorded, see `chat_messages.mcp_result`); the initial
observation is our sandbox's `Connected to <server>: N tools (...)` per server (the source records
no server version). The quality scores, subset and target tools go to `task.metadata`; they are
judgements of a model, not a verified reward, so the outcome carries no reward. The assistant's own
text and reasoning are not imported (they are the agent's, not the environment's). Rows with no
tool call (the irrelevance extension) have no step and go to the dead-letter file.
"""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from collectors.importers.chat_messages import (
    Conversation,
    ToolExchange,
    json_value,
    listed_tools,
    mcp_result,
    parse_conversation,
    step_info,
    tool_definitions,
    truncation,
    unnamed_server_initial,
)
from sandboxes.base import InvalidActionError
from sandboxes.mcp.actions import MCP_RESULT
from sandboxes.mcp.actions import parse_action as mcp_action
from schemas.records import Environment, Observation, Policy, Task, ToolDefinition

CONFIGS = ("Kimi-K2", "OSS", "Qwen3", "SFT")  # the card's configs, one folder each


@dataclass
class ServerTool:
    server: str  # the server's name as the row gives it; "" when the row names none
    name: str  # the name our action uses (see the module doc)
    own_name: str  # the name the server itself gives the tool
    definition: ToolDefinition


class ToucanImporter(Importer):
    name = "toucan"
    dataset = "Agent-Ark/Toucan-1.5M"
    license = "Apache-2.0"
    summary = "Toucan-1.5M MCP tool-use trajectories (Parquet) as mcp steps"
    id_field: ClassVar[str | None] = "uuid"

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        data = row.data
        uuid = require(data, "uuid", str)
        messages = json_value(require(data, "messages", (list, str)), "field 'messages'", list)
        metadata = _optional_json(data, "metadata", dict)
        conversation = parse_conversation(messages)
        if not conversation.exchanges:
            if conversation.unanswered:
                raise BadRow("no tool call in this row has a result: there is no step to import")
            raise BadRow(
                "the row makes no tool call (e.g. the irrelevance subset): there is no step to import"
            )
        servers = _servers(metadata)
        catalogue = _catalogue(_server_tools(servers) or _listed_tools(data, servers))
        turns = [self._turn(exchange, catalogue) for exchange in conversation.exchanges]
        return Episode(
            domain="mcp",
            task=_task(uuid, data, conversation),
            initial=_initial(servers, catalogue),
            turns=turns,
            environment=Environment(
                name="mcp",
                backend="imported",
                config={"source_format": "toucan", "servers": [_server_facts(s) for s in servers]},
            ),
            policy=_policy(metadata, row.uri),
            outcome=truncation(conversation),
            tools=_unique_definitions(catalogue),
        )

    def _turn(self, exchange: ToolExchange, catalogue: dict[str, ServerTool]) -> Turn:
        known = catalogue.get(exchange.name) or _by_suffix(exchange.name, catalogue)
        # A call to a tool the row does not list is kept under its own name: what the framework
        # answered (an unknown-tool error) is what a world model must learn for it.
        name, server = (known.name, known.server) if known else (exchange.name, "")
        try:
            action = mcp_action("tool_call", {"name": name, "arguments": exchange.arguments})
        except InvalidActionError as exc:
            raise BadRow(
                f"the call to {exchange.name!r} in message {exchange.message_index}: {exc}"
            ) from None
        info = step_info(exchange)
        if name != exchange.name:
            info["source_tool_name"] = exchange.name
        return Turn(action, mcp_result(server, name, exchange.result or [""]), info=info)


def _optional_json(data: dict[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if value in (None, "", "null"):
        return kind()
    return json_value(value, f"field {key!r}", kind)


def _by_suffix(name: str, catalogue: dict[str, ServerTool]) -> ServerTool | None:
    """The one tool whose own name ends a prefixed call name whose prefix is not the slug we derive
    (a server name with punctuation the generating framework wrote differently); None if not one."""
    matches = {id(e): e for e in catalogue.values() if e.server and name.endswith("-" + e.own_name)}
    return next(iter(matches.values())) if len(matches) == 1 else None


def _servers(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    servers = metadata.get("mcp_servers") or []
    if not isinstance(servers, list):
        raise BadRow(f"metadata.mcp_servers should be a list, got {type(servers).__name__}")
    named = [s for s in servers if isinstance(s, dict) and isinstance(s.get("server_name"), str)]
    if len(named) != len(servers):
        raise BadRow("every entry of metadata.mcp_servers needs a server_name")
    return named


def slug(server_name: str) -> str:
    """How Toucan's Qwen-Agent runs prefix a server's tools (data/ms_swift_format_converter.ipynb)."""
    return server_name.lower().replace(" ", "-")


def _server_tools(servers: list[dict[str, Any]]) -> list[tuple[str, ToolDefinition]]:
    """(server, tool) for the tools the servers listed themselves (`remote_server_response.tools`)."""
    listed: list[tuple[str, ToolDefinition]] = []
    for server in servers:
        response = server.get("remote_server_response") or {}
        tools = response.get("tools") if isinstance(response, dict) else None
        where = f"the tools of server {server['server_name']!r}"
        listed += [(server["server_name"], tool) for tool in tool_definitions(tools or [], where)]
    return listed


def _listed_tools(data: dict[str, Any], servers: list[dict[str, Any]]) -> list[tuple[str, ToolDefinition]]:
    """(server, tool) from the row's OpenAI-form tool list, for rows whose servers did not list their
    tools (the SFT config; rows without `remote_server_response`): a name that starts with exactly
    one server's prefix (`slug(server)-`) is that server's tool under the rest of the name; a name
    without a prefix (OpenAI-Agents runs) belongs to the row's server when it has only one."""
    key, value = listed_tools(data)
    listed = []
    for tool in tool_definitions(value, f"field {key!r}"):
        owners = [s["server_name"] for s in servers if tool.name.startswith(slug(s["server_name"]) + "-")]
        if len(owners) == 1:
            own = tool.name[len(slug(owners[0])) + 1 :]
            listed.append((owners[0], ToolDefinition(own, tool.description, tool.input_schema)))
        elif not owners and len(servers) == 1:
            listed.append((servers[0]["server_name"], tool))
        else:
            listed.append(("", tool))
    return listed


def _catalogue(listed: list[tuple[str, ToolDefinition]]) -> dict[str, ServerTool]:
    """Every name a call may use (the tool's own, and the prefixed one) -> the tool."""
    shared = Counter(tool.name for _, tool in listed)
    catalogue: dict[str, ServerTool] = {}
    for server, tool in listed:
        prefixed = f"{slug(server)}-{tool.name}" if server else tool.name
        name = tool.name if shared[tool.name] == 1 else prefixed
        entry = ServerTool(server, name, tool.name, ToolDefinition(name, tool.description, tool.input_schema))
        catalogue.setdefault(prefixed, entry)
        if shared[tool.name] == 1:
            catalogue[tool.name] = entry
    return catalogue


def _unique_definitions(catalogue: dict[str, ServerTool]) -> list[ToolDefinition]:
    seen: dict[str, ToolDefinition] = {}
    for entry in catalogue.values():
        seen.setdefault(entry.name, entry.definition)
    return list(seen.values())


def _initial(servers: list[dict[str, Any]], catalogue: dict[str, ServerTool]) -> Observation:
    if not servers:
        return unnamed_server_initial([tool.name for tool in _unique_definitions(catalogue)])
    lines, names = [], []
    for server in servers:
        tools = list(dict.fromkeys(e.name for e in catalogue.values() if e.server == server["server_name"]))
        lines.append(f"Connected to {server['server_name']}: {len(tools)} tools ({', '.join(tools)}).")
        names.append(server["server_name"])
    unowned = list(dict.fromkeys(e.name for e in catalogue.values() if not e.server))
    if unowned:  # tools of the row's list that no server's prefix claims
        lines.append(unnamed_server_initial(unowned).text)
    data = {
        "server": names[0] if len(names) == 1 else names,
        "tools": [t.name for t in _unique_definitions(catalogue)],
    }
    return Observation(format=MCP_RESULT, text="\n".join(lines), data=data)


def _server_facts(server: dict[str, Any]) -> dict[str, Any]:
    facts = {"name": server["server_name"]}
    for key in ("server_id", "server_slug", "primary_label", "secondary_labels"):
        if server.get(key) is not None:
            facts[key] = server[key]
    labels = server.get("labels")
    if isinstance(labels, dict) and isinstance(labels.get("primary_label"), str):
        facts["primary_label"] = labels["primary_label"]
    return facts


def _task(uuid: str, data: dict[str, Any], conversation: Conversation) -> Task:
    metadata: dict[str, Any] = {}
    subset = data.get("subset_name")
    if isinstance(subset, str) and subset:
        metadata["subset"] = subset
    target = data.get("target_tools")
    if isinstance(target, str):
        target = target.split(",")
    if isinstance(target, list):
        named = [t.strip() for t in target if isinstance(t, str) and t.strip()]
        if named:
            metadata["target_tools"] = named
    for source, key in (
        ("question_quality_assessment", "question_quality"),
        ("response_quality_assessment", "response_quality"),
    ):
        assessment = _assessment(data.get(source))
        if isinstance(assessment, str):
            metadata[f"{key}_text"] = assessment
        elif assessment:
            metadata[key] = assessment
    users = conversation.user_messages
    if len(users) > 1:
        metadata["later_user_messages"] = users[1:]
    question = data.get("question")
    instruction = question if isinstance(question, str) and question else (users[0] if users else "")
    return Task(id=uuid, instruction=instruction, metadata=metadata)


def _assessment(value: Any) -> dict[str, Any] | str:
    """A quality assessment's scores (see `_scores`); its text where it is prose, not JSON (some
    published rows write the judge's verdict as a sentence); {} where there is none."""
    if value in (None, "", "null"):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value.strip()
    if isinstance(value, str):
        return value.strip()
    return _scores(value) if isinstance(value, dict) else {}


def _scores(assessment: dict[str, Any]) -> dict[str, Any]:
    """The labels of a quality assessment without the judge's reasoning text: per dimension its
    score, plus top-level scalars (overall_score, desired_tools_used_percentage, ...)."""
    scores: dict[str, Any] = {}
    for key, value in assessment.items():
        if isinstance(value, dict) and "score" in value:
            scores[key] = value["score"]
        elif isinstance(value, int | float | bool | str) and key != "reasoning":
            scores[key] = value
    return scores


def _policy(metadata: dict[str, Any], uri: str) -> Policy:
    """The model and agent framework of the pipeline step that ran the agent, and the card's config."""
    config: dict[str, Any] = {}
    steps = metadata.get("synthetic_data_gen_configs")
    for step in steps if isinstance(steps, list) else []:
        params = step.get("generation_params") if isinstance(step, dict) else None
        if isinstance(params, dict) and params.get("agent"):
            config["model"] = params.get("model_path") or step.get("model") or ""
            config["agent"] = params["agent"]
    folder = posixpath.basename(posixpath.dirname(uri))
    if folder in CONFIGS:
        config["dataset_config"] = folder
    return Policy(name="imported", config=config)


IMPORTER = ToucanImporter()

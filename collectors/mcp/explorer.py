"""The embedded default MCP policy: tool calls synthesised from the server's own tool definitions.

Each step picks a tool (ones not tried yet, and ones whose required arguments can reuse a value
seen earlier, more often) and fills its arguments from the tool's input schema
(collectors/mcp/schema_values.py), preferring values the episode has already seen: a path the
filesystem server listed is read next, an entity created in memory is opened later, a hash that
`git_log` printed is shown with `git_show` (collectors/mcp/values.py). Some calls are wrong on
purpose, as agents' calls are: a required argument missing, a wrong type, a value out of range,
a tool name that does not exist. All randomness comes from the rng given at reset, so a seed and
the same observations give the same calls.

The tool definitions come from the task when it carries them (`metadata["tools"]`, as the
simulated sandbox takes them), else from `tools_by_server` (what the collector listed from each
catalogue server before the fleet started), else the initial observation's tool names alone, called
with no arguments.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.mcp.schema_values import Synthesizer, invalid
from collectors.mcp.values import ValuePool, role_of
from collectors.policies.explorer import NOT_A_KNOB, Explorer
from sandboxes.mcp import MCP_RESULT, TOOL_CALL, parse_action
from schemas.records import Action, Observation, Task, ToolDefinition

# Words in a tool name that mark a call which destroys what the episode built: called less often.
_DESTRUCTIVE = ("delete", "remove", "reset", "move", "drop")
_MADE_UP_VERBS = ("get", "list", "search", "update", "run")


@dataclass
class _Session:
    rng: random.Random
    server: str
    tools: list[ToolDefinition]
    pool: ValuePool
    steps: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    last_sent: dict[str, Any] = field(default_factory=dict)
    last_text: str = ""


def tool_definitions(data: Any) -> list[ToolDefinition]:
    """ToolDefinitions from their JSON form, a list of {name, description, input_schema}."""
    found = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            schema = item.get("input_schema")
            description = str(item.get("description") or "")
            found.append(
                ToolDefinition(item["name"], description, schema if isinstance(schema, dict) else {})
            )
    return found


def required_roles(tool: ToolDefinition) -> list[str]:
    """The value roles of a tool's required properties (what chaining can fill)."""
    properties = tool.input_schema.get("properties") or {}
    return [role_of(name, properties.get(name) or {}) for name in tool.input_schema.get("required") or []]


@dataclass(eq=False)
class McpExplorer(Explorer):
    """`invalid_rate`: share of calls whose arguments break the schema on purpose;
    `unknown_tool_rate`: share of calls to a tool the server does not have."""

    name = "explorer"
    tools_by_server: Mapping[str, Sequence[ToolDefinition]] = field(default_factory=dict, metadata=NOT_A_KNOB)
    invalid_rate: float = 0.12
    unknown_tool_rate: float = 0.03
    stop_probability: float = 0.06
    min_steps: int = 4
    session: _Session | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.invalid_rate + self.unknown_tool_rate <= 1:
            raise ValueError("invalid_rate + unknown_tool_rate must be between 0 and 1")
        self.tools_by_server = {name: list(tools) for name, tools in (self.tools_by_server or {}).items()}

    def config(self) -> dict:
        return {**super().config(), "servers": sorted(self.tools_by_server)}

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        data = observation.data or {}
        server = str(task.metadata.get("server") or data.get("server") or "")
        tools = tool_definitions(task.metadata.get("tools")) or list(self.tools_by_server.get(server, []))
        if not tools:
            names = data.get("tools") if isinstance(data.get("tools"), list) else []
            tools = [ToolDefinition(name=str(n)) for n in names]
        pool = ValuePool()
        for role, values in (task.metadata.get("values") or {}).items():
            for value in values if isinstance(values, list) else [values]:
                pool.add(role, value)
        pool.add_text(task.instruction)
        if isinstance(data.get("site"), str):
            pool.add("url", data["site"])
        self.session = _Session(rng=rng, server=server, tools=tools, pool=pool)

    def act(self, observation: Observation) -> Action | None:
        s = self.started(self.session)
        s.steps += 1
        if s.steps > 1:
            self._observe(observation)
        if not s.tools or (s.steps > self.min_steps and s.rng.random() < self.stop_probability):
            return None
        for _ in range(3):  # an agent rarely sends the very same call twice in a row
            action = self._call(s)
            if action.text != s.last_text:
                break
        s.last_text = action.text
        s.last_sent = action.arguments["arguments"]
        return action

    # -- one call --------------------------------------------------------------------------------

    def _call(self, s: _Session) -> Action:
        draw = s.rng.random()
        if draw < self.unknown_tool_rate:
            return tool_call(self._made_up_name(s), {})
        tool = self._pick_tool(s)
        synthesizer = Synthesizer(
            rng=s.rng, suggest=lambda name, schema: s.pool.suggest(name, schema, tool.name)
        )
        arguments = synthesizer.valid(tool.input_schema) if tool.input_schema else {}
        if not isinstance(arguments, dict):
            arguments = {}
        if draw < self.unknown_tool_rate + self.invalid_rate:
            broken = invalid(tool.input_schema, arguments, s.rng)
            if broken is not None:
                return tool_call(tool.name, broken[0])
        s.calls[tool.name] = s.calls.get(tool.name, 0) + 1
        return tool_call(tool.name, arguments)

    def _pick_tool(self, s: _Session) -> ToolDefinition:
        seen_roles = set(s.pool.roles())
        weights = []
        for tool in s.tools:
            weight = 3.0 if tool.name not in s.calls else 1.0 / (1 + s.calls[tool.name])
            roles = [r for r in required_roles(tool) if r]
            if roles and all(r in seen_roles for r in roles):
                weight *= 2.0  # its arguments can come from what the episode has seen
            if not roles and s.steps <= 2:
                weight *= 2.0  # discovery first: listings, status, the whole graph
            if any(word in tool.name.lower() for word in _DESTRUCTIVE):
                weight *= 0.4
            weights.append(weight)
        return s.rng.choices(s.tools, weights=weights)[0]

    def _made_up_name(self, s: _Session) -> str:
        names = {tool.name for tool in s.tools}
        base = s.rng.choice(s.tools).name
        candidates = [
            base + "s",
            base.replace("_", ""),
            f"{s.rng.choice(_MADE_UP_VERBS)}_{base.split('_')[-1]}",
        ]
        fresh = [c for c in candidates if c not in names]
        return s.rng.choice(fresh) if fresh else f"{base}_v2"

    def _observe(self, observation: Observation) -> None:
        s = self.session
        assert s is not None
        data = observation.data or {}
        s.pool.add_result(observation.text, data.get("structured_content"), s.last_sent)
        if observation.format == MCP_RESULT and data.get("is_error") is False:
            s.pool.add_arguments(s.last_sent)  # what worked: an entity created is one to open later


def tool_call(name: str, arguments: dict[str, Any]) -> Action:
    return parse_action(TOOL_CALL, {"name": name, "arguments": arguments})

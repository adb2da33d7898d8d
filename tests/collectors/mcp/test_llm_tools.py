"""The domain-agnostic LLM policy on MCP: the agent is shown the server's tool definitions, and its
replies become tool calls through the MCP domain's own parser (pure and fast)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from collectors.mcp.options import with_tool_lookup
from collectors.policies.base import INVALID
from collectors.policies.llm import LLMPolicy, parse_reply
from sandboxes.domains import domain_spec
from schemas.records import Observation, Task, ToolDefinition

FIXTURES = Path(__file__).parent / "fixtures"
TIME_TOOLS = [ToolDefinition(**tool) for tool in json.loads((FIXTURES / "time.json").read_text())["tools"]]
MCP = domain_spec("mcp")
CONNECTED = Observation(
    format="mcp_result",
    text="Connected to mcp-time 2026.10.19: 2 tools (get_current_time, convert_time).",
    data={"server": "time", "tools": ["get_current_time", "convert_time"]},
)
TASK = Task(id="t", instruction="What time is it in Tokyo?", metadata={"server": "time"})


def system_prompt(policy: LLMPolicy) -> str:
    policy.reset(TASK, CONNECTED, random.Random(0))
    return policy.messages("x")[0]["content"]


def test_the_tools_are_listed_before_the_action_space() -> None:
    policy = LLMPolicy("http://127.0.0.1:9/v1", "m", max_retries=0, tool_lookup=lambda task: TIME_TOOLS)
    prompt = system_prompt(policy)
    assert "a Model Context Protocol (MCP) tool server" in prompt
    listed = prompt.index("Tools:\n\n### get_current_time")
    assert listed < prompt.index("### convert_time") < prompt.index(MCP.action_space)
    assert '"required":["timezone"]' in prompt and "IANA timezone name" in prompt
    assert prompt.count('{"done": true}') == 1


def test_without_a_lookup_the_prompt_has_no_tools_section() -> None:
    prompt = system_prompt(LLMPolicy("http://127.0.0.1:9/v1", "m", max_retries=0))
    assert "Tools:" not in prompt and MCP.action_space in prompt


def test_the_collector_gives_each_episode_its_servers_tools() -> None:
    factory = with_tool_lookup(lambda: LLMPolicy("http://127.0.0.1:9/v1", "m"), {"time": TIME_TOOLS})
    policy = factory()
    assert isinstance(policy, LLMPolicy)
    assert "### convert_time" in system_prompt(policy)
    other = Task(id="u", metadata={"server": "memory"})
    policy.reset(other, CONNECTED, random.Random(0))
    assert "Tools:" not in policy.messages("x")[0]["content"]


def test_a_reply_becomes_a_tool_call_or_an_invalid_action() -> None:
    reply = '{"action": "tool_call", "name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}'
    action = parse_reply(reply, MCP)
    assert action is not None and action.kind == "tool_call"
    assert action.arguments == {"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}
    assert action.text == '{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}'
    bad = parse_reply('{"action": "tool_call", "arguments": {"timezone": "Asia/Tokyo"}}', MCP)
    assert bad is not None and bad.kind == INVALID and "name" in bad.arguments["error"]


def test_the_action_space_example_parses_once_filled_in() -> None:
    example = next(line for line in MCP.action_space.splitlines() if line.startswith("{"))
    filled = example.replace("<tool name>", "get_current_time").replace(
        "{<the tool's arguments>}", '{"timezone": "UTC"}'
    )
    action = parse_reply(filled, MCP)
    assert action is not None and action.kind == "tool_call", action
    assert action.arguments == {"name": "get_current_time", "arguments": {"timezone": "UTC"}}

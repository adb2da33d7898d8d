"""The simulator on the MCP and SWE domains, over a real local HTTP chat server whose model is a
deterministic function: tool definitions reach describe() and the system prompt, and predicted
results are read back into the data the real sandboxes record (error flags, exit status, diffs)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sandboxes.checks import check_sandbox
from schemas.render import tools_text
from tests.schemas.mcp_swe_records import (
    EDIT_DIFF,
    EDIT_MISSING,
    MCP_TOOLS,
    PYTEST_FAIL,
    READ_CORE,
    SWE_TOOLS,
    UNKNOWN_TOOL,
    entities_result,
    mcp_text,
    mcp_trajectory,
    swe_trajectory,
    time_result,
)
from tests.training.test_backends import scripted_chat_server
from training.backends.openai_http import OpenAIBackend
from training.observations.parsers import mcp_data, swe_data
from training.simulator import SimulatedSandbox

MCP = mcp_trajectory()
SWE = swe_trajectory()


def _answer(text: str) -> str:
    return f"<think>\nThe tool runs.\n</think>\n<predicted_observation>\n{text}\n</predicted_observation>"


def mcp_world(messages: list[dict]) -> str:
    """An MCP world model that knows two tools: the call's name picks the result."""
    assert "## Tools\n" in messages[0]["content"], "the tools did not reach the system prompt"
    call = json.loads(messages[-1]["content"].split("**Action:**\n", 1)[1])
    if call["name"] == "get_current_time":
        return _answer(mcp_text(time_result("2026-11-30T11:00:00+01:00")))
    if call["name"] == "create_entities":
        return _answer(mcp_text(entities_result("e-1")))
    return _answer(mcp_text(UNKNOWN_TOOL))


def swe_world(messages: list[dict]) -> str:
    action = messages[-1]["content"].split("**Action:**\n", 1)[1]
    if action.startswith("bash("):
        return _answer(PYTEST_FAIL.format(seconds="0.02"))
    if action.startswith("read("):
        return _answer(READ_CORE)
    return _answer(EDIT_DIFF if "high + 1" in action else EDIT_MISSING)


def test_simulated_mcp_sandbox_serves_the_tools_and_reads_results_back() -> None:
    task = dataclasses.replace(
        MCP.task, metadata={**MCP.task.metadata, "initial_observation": MCP.initial_observation}
    )
    actions = [s.action for s in MCP.steps]
    with scripted_chat_server(mcp_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url), domain="mcp", tools=MCP_TOOLS)
        check_sandbox(sim, task, actions)
        first = sim.reset(task)
        assert first.format == "mcp_result" and first.text.startswith("Connected to memory-time")
        assert sim.describe().tools == MCP_TOOLS
        time_obs, entities_obs, unknown_obs = (sim.step(a).observation for a in actions)
        assert server.requests[-1]["messages"][0]["content"].count(tools_text(MCP_TOOLS)) == 1
        assert time_obs.format == "mcp_result"
        assert time_obs.data["tool"] == "get_current_time" and time_obs.data["server"] == "memory"
        assert (time_obs.data["is_error"], time_obs.data["error"], time_obs.data["structured_content"]) == (
            False,
            None,
            None,
        )
        assert entities_obs.data["structured_content"]["entities"][0]["name"] == "alice"
        assert unknown_obs.data["is_error"] is True
        assert unknown_obs.data["error"] == {"code": -32602, "message": "Unknown tool: get_weather"}
        # Tools given in the task (as a recording stores them) replace the constructor's for that episode.
        recorded = [dataclasses.asdict(t) for t in MCP_TOOLS[:1]]
        sim.reset(dataclasses.replace(task, metadata={**task.metadata, "tools": recorded}))
        assert [t.name for t in sim.describe().tools] == ["get_current_time"]
        with pytest.raises(ValueError, match="needs at least a name"):
            sim.reset(dataclasses.replace(task, metadata={**task.metadata, "tools": [{"description": "x"}]}))
        sim.close()


def test_simulated_swe_sandbox_reads_exit_status_diffs_and_errors() -> None:
    task = dataclasses.replace(SWE.task, metadata={"initial_observation": SWE.initial_observation})
    with scripted_chat_server(swe_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url), domain="swe", tools=SWE_TOOLS)
        sim.reset(task)
        bash, read, missing, fixed, _ = (sim.step(s.action).observation for s in SWE.steps)
        assert {o.format for o in (bash, read, missing, fixed)} == {"swe_tool_result"}
        assert (bash.data["tool"], bash.data["exit_status"], bash.data["timed_out"]) == ("bash", 1, False)
        assert (read.data["tool"], read.data["exit_status"], read.data["error"]) == ("read", None, "")
        assert missing.data["error"] == EDIT_MISSING and missing.data["diff"] == ""
        assert fixed.data["diff"] == EDIT_DIFF and fixed.data["error"] == ""
        assert tools_text(SWE_TOOLS) in server.requests[0]["messages"][0]["content"]
        sim.close()


def test_observation_parsers_follow_the_recorded_data() -> None:
    """Parsed from the text alone, the fields agree with what the (constructed) recordings hold."""
    for step in MCP.steps:
        parsed = mcp_data(step.observation.text, step.action.arguments["name"])
        assert {k: step.observation.data[k] for k in parsed} == parsed
    assert mcp_data(MCP.initial_observation.text) == {"tools": ["get_current_time", "create_entities"]}
    assert mcp_data("not json") == {}
    for step in SWE.steps:
        parsed = swe_data(step.observation.text, step.action.kind)
        assert parsed == step.observation.data
        if step.observation.data["error"] == "":  # a result's form names its tool; an error's does not
            assert swe_data(step.observation.text)["tool"] == step.action.kind
    assert swe_data("a\n[... 2048 bytes truncated ...]\n[exit status: 0]")["truncated"]  # an older recording
    timed_out = swe_data("partial output\n[... 2048 of 4096 bytes truncated ...]\n[timed out after 30 s]")
    assert (timed_out["tool"], timed_out["timed_out"], timed_out["truncated"], timed_out["exit_status"]) == (
        "bash",
        True,
        True,
        None,
    )

"""Tool definitions reach the world model's system prompt, the AgentWorldBench record, the SFT chat
and the CPT document, deterministically; the MCP and SWE wording names the contract's forms."""

from __future__ import annotations

import dataclasses
import json

from schemas import from_row, to_row
from schemas.domains import find_record
from schemas.records import Observation, ToolDefinition
from schemas.render import (
    agentworldbench_record,
    chat_messages,
    cpt_document,
    is_echo_turn,
    system_prompt,
    tools_text,
    trajectory_system_prompt,
)
from tests.schemas.factories import small_trajectory
from tests.schemas.mcp_swe_records import CREATE_ENTITIES, GET_TIME, mcp_trajectory, swe_trajectory


def test_tools_are_listed_in_order_with_compact_schemas() -> None:
    text = tools_text([GET_TIME, CREATE_ENTITIES])
    blocks = text.split("\n\n")
    assert [b.split("\n", 1)[0] for b in blocks] == ["### get_current_time", "### create_entities"]
    assert blocks[0].split("\n") == [
        "### get_current_time",
        "Get current time in a specific timezone",
        'Input schema: {"properties":{"timezone":{"description":"IANA timezone name","type":"string"}},'
        '"required":["timezone"],"type":"object"}',
    ]
    # The output schema only where the tool published one; each schema is valid JSON on one line.
    assert "Output schema" not in blocks[0]
    output = blocks[1].split("\n")[-1]
    assert json.loads(output.removeprefix("Output schema: ")) == CREATE_ENTITIES.output_schema
    # No description: no empty line; no input schema: an object.
    bare = tools_text([ToolDefinition("noop")])
    assert bare == '### noop\nInput schema: {"type":"object"}'


def test_system_prompt_has_a_tools_section_before_the_initial_state() -> None:
    t = mcp_trajectory()
    system = trajectory_system_prompt(t)
    sections = [line for line in system.split("\n") if line.startswith("## ")]
    assert sections == [
        "## Environment",
        "## Action space",
        "## Tools",
        "## Initial state",
        "## How to answer",
    ]
    assert tools_text(t.environment.tools) in system
    assert t.initial_observation.text in system
    # Without tools (terminal, web, search) the prompt is exactly what it was before tools existed.
    terminal = small_trajectory("t-1")
    plain = system_prompt("terminal", terminal.initial_observation)
    assert "## Tools" not in plain and trajectory_system_prompt(terminal) == plain


def test_record_chat_and_cpt_carry_the_tools_and_survive_a_parquet_row_round_trip() -> None:
    for t in (mcp_trajectory(), swe_trajectory()):
        listed = tools_text(t.environment.tools)
        record = agentworldbench_record(t, 2)
        assert listed in record["system_str"] and record["task"] == t.domain
        assert chat_messages(t, 2)[0] == {"role": "system", "content": record["system_str"]}
        assert f"**Tools:**\n{listed}\n\n**Initial State:**" in cpt_document(t)
        # Deterministic: the same text after the trajectory is stored and read back.
        again = from_row(to_row(t))
        assert agentworldbench_record(again, 2) == record and cpt_document(again) == cpt_document(t)
        # A system prompt made once for the trajectory gives the same records as one made per turn.
        shared = trajectory_system_prompt(t)
        assert [agentworldbench_record(t, k, system_str=shared) for k in range(1, len(t.steps) + 1)] == [
            agentworldbench_record(t, k) for k in range(1, len(t.steps) + 1)
        ]


def test_tool_order_is_the_environments_and_changes_the_prompt() -> None:
    t = mcp_trajectory()
    swapped = dataclasses.replace(
        t, environment=dataclasses.replace(t.environment, tools=[CREATE_ENTITIES, GET_TIME])
    )
    a, b = trajectory_system_prompt(t), trajectory_system_prompt(swapped)
    assert a != b and b.index("### create_entities") < b.index("### get_current_time")


def test_mcp_and_swe_wording_names_the_observation_forms() -> None:
    mcp = find_record("mcp").prompt
    for form in (
        "Connected to <server> <version>: N tools (a, b, c).",
        '"structuredContent"',
        '"isError": true',
        '{"error": {"code": <JSON-RPC error code>, "message": "..."}}',
        '{"error": {"code": "timeout", "message": "no answer within N s"}}',
    ):
        assert form in mcp.environment, form
    assert '{"name": "<tool>", "arguments": {...}}' in mcp.actions
    swe = find_record("swe").prompt
    for form in (
        "[exit status: N]",
        "[timed out after N s]",
        "[... N of M bytes truncated ...]",
        "cat -n",
        "/repo",
    ):
        assert form in swe.environment, form
    for call in ("read(path='src/a.py'", "edit(command='str_replace'", "bash(command='python -m pytest -q'"):
        assert call in swe.actions, call
    # The forms the wording names are the forms the constructed observations have.
    assert swe_trajectory().steps[0].observation.text.endswith("[exit status: 1]")
    initial = Observation("mcp_result", mcp_trajectory().initial_observation.text)
    assert initial.text.startswith("Connected to ") and initial.text.endswith(
        "tools (get_current_time, create_entities)."
    )


def test_tool_results_are_not_echo_turns() -> None:
    for t in (mcp_trajectory(), swe_trajectory()):
        assert not any(is_echo_turn(step) for step in t.steps), t.domain
    # An edit whose diff ends with its `command` word ("create") is a real result, not an echo.
    created = swe_trajectory().steps[3]
    created.action.arguments["command"] = "create"
    created.observation.text = "--- /dev/null\n+++ b/make.py\n@@ -0,0 +1 @@\n+create"
    assert not is_echo_turn(created)

"""MCP and SWE trajectories in the forms their sandboxes record (sandboxes/mcp/README.md,
sandboxes/swe/README.md): `mcp_result` JSON texts with tool definitions in the environment,
`swe_tool_result` texts of the read/edit/bash tools. Built here so the render, corpus, simulator and
fidelity tests share them."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from schemas.records import Action, Environment, Observation, Policy, Task, ToolDefinition, Trajectory
from tests.schemas.factories import trajectory

T0 = datetime(2026, 11, 30, 9, 30, tzinfo=UTC)

GET_TIME = ToolDefinition(
    name="get_current_time",
    description="Get current time in a specific timezone",
    input_schema={
        "type": "object",
        "properties": {"timezone": {"type": "string", "description": "IANA timezone name"}},
        "required": ["timezone"],
    },
)
CREATE_ENTITIES = ToolDefinition(
    name="create_entities",
    description="Create multiple new entities in the knowledge graph",
    input_schema={
        "type": "object",
        "properties": {"entities": {"type": "array", "items": {"type": "object"}}},
        "required": ["entities"],
    },
    output_schema={"type": "object", "properties": {"entities": {"type": "array"}}},
)
MCP_TOOLS = [GET_TIME, CREATE_ENTITIES]

SWE_TOOLS = [
    ToolDefinition(
        "read",
        "Read a file with line numbers, or list a directory.",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"},
            },
            "required": ["path"],
        },
    ),
    ToolDefinition(
        "edit",
        "Edit a file: str_replace, create or insert.",
        {
            "type": "object",
            "properties": {
                "command": {"enum": ["str_replace", "create", "insert"]},
                "path": {"type": "string"},
                "old_str": {"type": "string"},
                "new_str": {"type": "string"},
            },
            "required": ["command", "path"],
        },
    ),
    ToolDefinition(
        "bash",
        "Run a command from the repository root.",
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    ),
]


def mcp_text(result: dict[str, Any]) -> str:
    """The canonical text of an MCP result: JSON, 2-space indent, keys in the given order."""
    return json.dumps(result, ensure_ascii=False, indent=2)


def time_result(datetime_text: str, day: str = "Monday") -> dict[str, Any]:
    inner = {"timezone": "Europe/Berlin", "datetime": datetime_text, "day_of_week": day, "is_dst": False}
    return {"content": [{"type": "text", "text": json.dumps(inner, indent=2)}], "isError": False}


def entities_result(entity_id: str) -> dict[str, Any]:
    entities = [{"name": "alice", "entityType": "person", "id": entity_id, "observations": ["likes tea"]}]
    return {
        "content": [{"type": "text", "text": json.dumps(entities)}],
        "structuredContent": {"entities": entities},
        "isError": False,
    }


UNKNOWN_TOOL = {"error": {"code": -32602, "message": "Unknown tool: get_weather"}}


def _call(name: str, arguments: dict[str, Any]) -> Action:
    payload = {"name": name, "arguments": arguments}
    return Action("tool_call", payload, json.dumps(payload, ensure_ascii=False))


def _mcp_obs(result: dict[str, Any], tool: str) -> Observation:
    error = result.get("error")
    structured = result.get("structuredContent")
    data = {
        "server": "memory",
        "tool": tool,
        "is_error": bool(error) or bool(result.get("isError")),
        "error": error,
        "structured_content": structured,
    }
    return Observation("mcp_result", mcp_text(result), data)


def _trajectory(trajectory_id: str, domain: str, env: Environment, task: Task, initial: Observation, steps):
    return trajectory(
        steps,
        trajectory_id=trajectory_id,
        domain=domain,
        environment=env,
        task=task,
        initial=initial,
        policy=Policy("explorer", {"seed": 1}),
        collector=f"collectors.{domain}",
        at=T0,
        latency_s=0.05,
        seconds_apart=1,
    )


def mcp_trajectory(
    trajectory_id: str = "mcp-0001", when: str = "2026-11-30T10:30:00+01:00", entity_id: str = "e-7f3a"
) -> Trajectory:
    """A time call, an entity creation with structured content, and an unknown tool."""
    env = Environment(
        "mcp",
        "bwrap",
        "memory-time 1.0.0",
        {"server": "memory", "server_info": {"name": "memory-time", "version": "1.0.0"}},
        copy.deepcopy(MCP_TOOLS),  # tests plant secrets in them: no trajectory shares the module's
    )
    initial = Observation(
        "mcp_result",
        "Connected to memory-time 1.0.0: 2 tools (get_current_time, create_entities).",
        {"server": "memory", "tools": ["get_current_time", "create_entities"]},
    )
    steps = [
        (
            _call("get_current_time", {"timezone": "Europe/Berlin"}),
            _mcp_obs(time_result(when), "get_current_time"),
        ),
        (
            _call("create_entities", {"entities": [{"name": "alice", "entityType": "person"}]}),
            _mcp_obs(entities_result(entity_id), "create_entities"),
        ),
        (_call("get_weather", {"city": "Berlin"}), _mcp_obs(UNKNOWN_TOOL, "get_weather")),
    ]
    task = Task(f"task-{trajectory_id}", "Note who alice is.", metadata={"server": "memory"})
    return _trajectory(trajectory_id, "mcp", env, task, initial, steps)


PYTEST_FAIL = """..F.                                                                     [100%]
=================================== FAILURES ===================================
________________________________ test_clamp_high _______________________________

    def test_clamp_high():
>       assert clamp(15, 0, 10) == 10
E       assert 11 == 10

tests/test_core.py:9: AssertionError
=========================== short test summary info ============================
FAILED tests/test_core.py::test_clamp_high - assert 11 == 10
1 failed, 3 passed in {seconds}s
[exit status: 1]"""
PYTEST_PASS = """....                                                                     [100%]
4 passed in {seconds}s
[exit status: 0]"""
READ_CORE = """     1\tdef clamp(value, low, high):
     2\t    if value > high:
     3\t        return high + 1
     4\t    return max(value, low)"""
EDIT_DIFF = """--- a/src/core.py
+++ b/src/core.py
@@ -1,4 +1,4 @@
 def clamp(value, low, high):
     if value > high:
-        return high + 1
+        return high
     return max(value, low)"""
EDIT_MISSING = "Error: old_str 'return hgh' not found in src/core.py"


def _swe_obs(
    tool: str, text: str, exit_status: int | None = None, diff: str = "", error: str = ""
) -> Observation:
    data = {"tool": tool, "exit_status": exit_status, "timed_out": False, "truncated": False, "error": error}
    if tool == "edit":
        data["diff"] = diff
    return Observation("swe_tool_result", text, data)


def _swe_call(tool: str, **arguments: Any) -> Action:
    shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    return Action(tool, arguments, f"{tool}({shown})")


def swe_trajectory(trajectory_id: str = "swe-0001", seconds: str = "0.03") -> Trajectory:
    """Run the failing tests, read the file, a failed edit, the fix, and the passing run."""
    env = Environment("swe", "bwrap", "clampy 1.0.0", {"repo": "clampy"}, copy.deepcopy(SWE_TOOLS))
    initial = Observation(
        "swe_tool_result",
        "Repository clampy 1.0.0 at /repo. Run the tests with: python -m pytest -q\nsrc/\ntests/\nsetup.py",
        {"tool": "", "exit_status": None},
    )
    pytest = "python -m pytest -q"
    steps = [
        (_swe_call("bash", command=pytest), _swe_obs("bash", PYTEST_FAIL.format(seconds=seconds), 1)),
        (_swe_call("read", path="src/core.py"), _swe_obs("read", READ_CORE)),
        (
            _swe_call("edit", command="str_replace", path="src/core.py", old_str="return hgh", new_str="x"),
            _swe_obs("edit", EDIT_MISSING, error=EDIT_MISSING),
        ),
        (
            _swe_call("edit", command="str_replace", path="src/core.py", old_str="high + 1", new_str="high"),
            _swe_obs("edit", EDIT_DIFF, diff=EDIT_DIFF),
        ),
        (_swe_call("bash", command=pytest), _swe_obs("bash", PYTEST_PASS.format(seconds=seconds), 0)),
    ]
    task = Task(f"task-{trajectory_id}", "The test suite of clampy fails; make the tests pass.")
    return _trajectory(trajectory_id, "swe", env, task, initial, steps)

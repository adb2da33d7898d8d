"""Each embedded server, real and in bwrap: tools recorded, a valid call, an invalid argument, an
unknown tool, and what a reset restores."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from sandboxes.domains import REPLAY_BACKEND, domain_spec
from sandboxes.mcp import TOOL_CALL, McpSandbox, parse_action
from schemas.records import Observation, Task, ToolDefinition
from tests.sandboxes.mcp.conftest import TrackedSandbox

WORKDIR = "/home/agent/workdir"
SITE = "{site}"  # replaced by the URL of the sandbox's local site

# server -> (a tool it lists, a valid call, what its result says, an invalid call, what its error says)
CASES: dict[str, tuple[str, tuple[str, dict[str, Any]], str, tuple[str, dict[str, Any]], str]] = {
    "time": (
        "convert_time",
        ("get_current_time", {"timezone": "UTC"}),
        '"timezone": "UTC"',
        ("get_current_time", {"timezone": 5}),
        "Input should be a valid string",
    ),
    "git": (
        "git_commit",
        ("git_log", {"repo_path": WORKDIR, "max_count": 1}),
        "Message: Add sub()",
        ("git_log", {}),
        "repo_path\\n  Field required",
    ),
    "fetch": (
        "fetch",
        ("fetch", {"url": SITE + "books/"}),
        "[The River](/books/1.html)",
        ("fetch", {"url": "not a url"}),
        "Input should be a valid URL",
    ),
    "filesystem": (
        "write_file",
        ("read_text_file", {"path": WORKDIR + "/notes/todo.txt"}),
        "buy milk",
        ("read_text_file", {"path": 42}),
        "expected string, received number",
    ),
    "memory": (
        "read_graph",
        ("create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["tea"]}]}),
        '"name": "Ada"',
        ("create_entities", {"entities": "Ada"}),
        "expected array, received string",
    ),
}


def call(sandbox: McpSandbox, name: str, arguments: dict[str, Any], site: str = "") -> Observation:
    filled = json.loads(json.dumps(arguments).replace(SITE, site))
    return sandbox.step(parse_action(TOOL_CALL, {"name": name, "arguments": filled})).observation


@pytest.mark.bwrap
@pytest.mark.parametrize("server", list(CASES))
def test_embedded_server(sandbox: TrackedSandbox, server: str) -> None:
    listed, (tool, arguments), expected, (bad_tool, bad_arguments), complaint = CASES[server]
    first = sandbox.reset(Task(id=f"{server}-1", metadata={"server": server}))
    env = sandbox.describe()
    # Discovery: identity and every tool definition, schemas included, in the server's order.
    assert env.name == "mcp" and env.backend == "bwrap" and env.config["server"] == server
    info = env.config["server_info"]
    assert env.image == f"{info['name']} {info['version']}" and info["protocol_version"]
    assert env.config["entry"]["package"] == sandbox.config.catalogue[server].package
    names = [t.name for t in env.tools]
    assert listed in names and all(isinstance(t, ToolDefinition) for t in env.tools)
    assert all(t.input_schema.get("type") == "object" and t.description for t in env.tools)
    assert first.format == "mcp_result" and first.data["tools"] == names
    assert first.text == f"Connected to {env.image}: {len(names)} tools ({', '.join(names)})."

    good = call(sandbox, tool, arguments, first.data.get("site", ""))
    assert expected in good.text, good.text
    assert good.data == {
        "server": server,
        "tool": tool,
        "is_error": False,
        "error": None,
        "structured_content": json.loads(good.text).get("structuredContent"),
    }
    assert json.loads(good.text)["isError"] is False

    bad = call(sandbox, bad_tool, bad_arguments)
    assert bad.data["is_error"] is True and complaint in bad.text, bad.text

    unknown = call(sandbox, "no_such_tool", {})
    assert unknown.data["is_error"] is True
    payload = json.loads(unknown.text)
    if "error" in payload:  # the Python SDK's servers answer a JSON-RPC error
        assert payload == {"error": {"code": -32602, "message": "Unknown tool: no_such_tool"}}
        assert unknown.data["error"] == payload["error"]
    else:  # the TypeScript SDK's servers answer an error result
        assert payload["content"][0]["text"] == "MCP error -32602: Tool no_such_tool not found"


@pytest.mark.bwrap
def test_reset_restores_state_files_and_workdirs(sandbox: TrackedSandbox) -> None:
    sandbox.reset(Task(id="memory-a", metadata={"server": "memory"}))
    call(sandbox, "create_entities", {"entities": [{"name": "Bo", "entityType": "cat", "observations": []}]})
    assert '"name": "Bo"' in call(sandbox, "read_graph", {}).text
    sandbox.reset(Task(id="memory-b", metadata={"server": "memory"}))
    assert json.loads(call(sandbox, "read_graph", {}).text)["structuredContent"] == {
        "entities": [],
        "relations": [],
    }

    sandbox.reset(Task(id="fs-a", metadata={"server": "filesystem"}))
    written = call(sandbox, "write_file", {"path": WORKDIR + "/new.txt", "content": "hello"})
    assert written.data["is_error"] is False
    sandbox.reset(Task(id="fs-b", metadata={"server": "filesystem"}))
    listing = call(sandbox, "list_directory", {"path": WORKDIR}).text
    assert "new.txt" not in listing and "README.md" in listing

    logs = []
    for episode in ("git-a", "git-b"):
        sandbox.reset(Task(id=episode, metadata={"server": "git"}))
        logs.append(call(sandbox, "git_log", {"repo_path": WORKDIR}).text)
        call(sandbox, "git_commit", {"repo_path": WORKDIR, "message": "changed in " + episode})
    assert logs[0] == logs[1] and logs[0].count("Commit: ") == 3  # the same three commits, same SHAs


@pytest.mark.bwrap
def test_a_stateless_server_is_kept_across_resets(sandbox: TrackedSandbox) -> None:
    sandbox.reset(Task(id="time-a", metadata={"server": "time"}))
    before = sandbox.resources()
    sandbox.reset(Task(id="time-b", metadata={"server": "time"}))
    assert sandbox.resources() == before
    assert '"timezone": "Asia/Tokyo"' in call(sandbox, "get_current_time", {"timezone": "Asia/Tokyo"}).text


@pytest.mark.bwrap
def test_a_recorded_environment_replays_in_a_fresh_sandbox(sandbox: TrackedSandbox) -> None:
    sandbox.reset(Task(id="memory-rec", metadata={"server": "memory"}))
    recorded = sandbox.describe()
    replay = domain_spec("mcp").replay_sandbox(recorded)
    assert isinstance(replay, McpSandbox) and replay.config.catalogue == {
        "memory": sandbox.config.catalogue["memory"]
    }
    with replay:
        replay.reset(Task(id="memory-rec", metadata={"server": "memory"}))
        assert [t.name for t in replay.describe().tools] == [t.name for t in recorded.tools]
        assert call(replay, "read_graph", {}).data["is_error"] is False
    local = dataclasses.replace(recorded, config={**recorded.config, REPLAY_BACKEND: "local"})
    assert domain_spec("mcp").replay_sandbox(local).describe().backend == "local"

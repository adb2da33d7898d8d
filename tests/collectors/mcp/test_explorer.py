"""The MCP explorer against the real embedded servers, through the real McpSandbox (bwrap)."""

from __future__ import annotations

import json
import random
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from collectors.mcp.explorer import McpExplorer
from collectors.tasks import embedded_tasks
from sandboxes.mcp import McpConfig, McpSandbox
from sandboxes.mcp.isolation import WORKDIR_IN_SANDBOX
from schemas.records import Action, Observation, Task, ToolDefinition
from tests.collectors.conftest import play

SERVERS = ("time", "git", "fetch", "filesystem", "memory")
TASKS: dict[str, Task] = {}
for spec in embedded_tasks("mcp"):
    TASKS.setdefault(spec.task.metadata["server"], spec.task)  # the first task of each server


@pytest.fixture(scope="module")
def sandbox() -> Iterator[McpSandbox]:
    with McpSandbox(McpConfig()) as box:
        yield box


@pytest.fixture(scope="module")
def tools(sandbox: McpSandbox) -> dict[str, list[ToolDefinition]]:
    found = {}
    for server in SERVERS:
        sandbox.reset(Task(id=f"list-{server}", metadata={"server": server}))
        found[server] = sandbox.describe().tools
    return found


def episode(
    sandbox: McpSandbox, policy: McpExplorer, task: Task, seed: int, steps: int
) -> list[tuple[Action, Observation]]:
    return play(sandbox, policy, task, random.Random(seed), steps)


def leaves(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for child in value.values():
            yield from leaves(child)
    elif isinstance(value, list):
        for child in value:
            yield from leaves(child)
    elif isinstance(value, str):
        yield value


def chained(played: list[tuple[Action, Observation]], task: Task) -> set[str]:
    """Argument values that an earlier observation showed and neither the task nor an earlier call
    of the episode had given: what the explorer learnt from results."""
    given = set(leaves(task.metadata.get("values", {})))
    found: set[str] = set()
    for i, (action, _) in enumerate(played):
        earlier = [observation.text for _, observation in played[:i]]
        sent = {v for previous, _ in played[:i] for v in leaves(previous.arguments)}
        for value in leaves(action.arguments["arguments"]):
            if len(value) > 3 and value not in given | sent and any(value in text for text in earlier):
                found.add(value)
    return found


def test_embedded_tasks_name_the_sandboxes_workdir() -> None:
    """Tasks carry the server's view of its private directory; the sandbox decides where that is."""
    for spec in embedded_tasks("mcp"):
        for value in [*leaves(spec.task.metadata.get("values", {})), *leaves(spec.actions)]:
            if value.startswith("/"):
                assert value.startswith(WORKDIR_IN_SANDBOX), (spec.id, value)


def test_tools_from_the_task_else_the_observations_names() -> None:
    """A task may carry its tools (as the simulated sandbox takes them); with none known anywhere,
    the initial observation's tool names are called without arguments."""
    recorded = json.loads((Path(__file__).parent / "fixtures" / "time.json").read_text())["tools"]
    connected = Observation("mcp_result", "Connected", {"server": "clock", "tools": ["tick", "tock"]})
    policy = McpExplorer(invalid_rate=0.0, unknown_tool_rate=0.0)
    policy.reset(Task(id="t", metadata={"server": "clock", "tools": recorded}), connected, random.Random(0))
    action = policy.act(connected)
    assert action is not None and action.arguments["name"] in ("get_current_time", "convert_time")
    schema = next(t["input_schema"] for t in recorded if t["name"] == action.arguments["name"])
    jsonschema.validate(action.arguments["arguments"], schema)
    policy.reset(Task(id="u", metadata={"server": "clock"}), connected, random.Random(0))
    action = policy.act(connected)
    assert action is not None and action.arguments in (
        {"name": "tick", "arguments": {}},
        {"name": "tock", "arguments": {}},
    )


@pytest.mark.parametrize("server", SERVERS)
def test_calls_follow_the_listed_schemas(
    sandbox: McpSandbox, tools: dict[str, list[ToolDefinition]], server: str
) -> None:
    """With no deliberate mistakes every call names a listed tool with arguments its schema allows;
    the server answers each with a result (never a protocol error)."""
    policy = McpExplorer(tools, invalid_rate=0.0, unknown_tool_rate=0.0, stop_probability=0.0)
    played = episode(sandbox, policy, TASKS[server], seed=1, steps=8)
    assert len(played) == 8
    schemas = {tool.name: tool.input_schema for tool in tools[server]}
    for action, observation in played:
        name, arguments = action.arguments["name"], action.arguments["arguments"]
        assert action.kind == "tool_call" and action.text == json.dumps(action.arguments, ensure_ascii=False)
        jsonschema.validate(arguments, schemas[name])
        assert observation.format == "mcp_result" and observation.data["error"] is None, observation.text
    assert len({a.arguments["name"] for a, _ in played}) >= min(3, len(schemas))
    if server != "time":
        assert any(not o.data["is_error"] for _, o in played), "no call succeeded"


def test_deliberate_mistakes_break_the_schema_and_are_answered(
    sandbox: McpSandbox, tools: dict[str, list[ToolDefinition]]
) -> None:
    policy = McpExplorer(tools, invalid_rate=0.6, unknown_tool_rate=0.2, stop_probability=0.0)
    played = episode(sandbox, policy, TASKS["filesystem"], seed=3, steps=12)
    schemas = {tool.name: tool.input_schema for tool in tools["filesystem"]}
    unknown = [(a, o) for a, o in played if a.arguments["name"] not in schemas]
    broken = [
        (a, o)
        for a, o in played
        if a.arguments["name"] in schemas
        and not jsonschema.Draft7Validator(schemas[a.arguments["name"]]).is_valid(a.arguments["arguments"])
    ]
    assert unknown and broken, [a.text for a, _ in played]
    # Answered as the client receives it: a protocol error (Python SDK servers) or an error result
    # (the TypeScript SDK's), naming the tool either way.
    for action, observation in unknown:
        assert observation.data["is_error"] and action.arguments["name"] in observation.text, observation.text
    for _, observation in broken:
        assert observation.data["is_error"], observation.text


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("filesystem", WORKDIR_IN_SANDBOX + "/"),  # a path the server listed, read or edited next
        ("git", ""),  # a commit hash, branch or changed file git printed
    ],
)
def test_values_from_results_are_used_in_later_calls(
    sandbox: McpSandbox, tools: dict[str, list[ToolDefinition]], server: str, expected: str
) -> None:
    policy = McpExplorer(tools, invalid_rate=0.0, unknown_tool_rate=0.0, stop_probability=0.0)
    found: set[str] = set()
    for seed in range(3):
        found |= chained(episode(sandbox, policy, TASKS[server], seed=seed, steps=12), TASKS[server])
    assert any(value.startswith(expected) for value in found), found


def test_links_on_a_fetched_page_are_followed(
    sandbox: McpSandbox, tools: dict[str, list[ToolDefinition]]
) -> None:
    """The fetch server reads the sandbox's local site; a page's relative links are fetched later."""
    policy = McpExplorer(tools, invalid_rate=0.0, unknown_tool_rate=0.0, stop_probability=0.0)
    played = episode(sandbox, policy, TASKS["fetch"], seed=0, steps=6)
    followed = []
    for i, (action, _) in enumerate(played):
        path = urllib.parse.urlsplit(action.arguments["arguments"]["url"]).path
        if len(path) > 1 and any(f"]({path})" in o.text for a, o in played[:i] if not o.data["is_error"]):
            followed.append(path)
    assert followed, [a.text for a, _ in played]


def test_an_entity_created_in_memory_is_used_later(
    sandbox: McpSandbox, tools: dict[str, list[ToolDefinition]]
) -> None:
    """No names given by the task: those of entities the server confirmed created come back later."""
    task = Task(id="memory-blank", metadata={"server": "memory"})
    policy = McpExplorer(tools, invalid_rate=0.0, unknown_tool_rate=0.0, stop_probability=0.0)
    reused = set()
    for seed in range(3):
        played = episode(sandbox, policy, task, seed=seed, steps=10)
        created: set[str] = set()
        for action, observation in played:
            name, arguments = action.arguments["name"], action.arguments["arguments"]
            if name != "create_entities":
                reused |= created & set(leaves(arguments))
            elif not observation.data["is_error"]:
                created |= {entity["name"] for entity in arguments["entities"]}
        assert policy.session is not None and created <= set(policy.session.pool.get("name"))
    assert reused


def test_the_git_repository_is_learnt_from_the_servers_refusal(
    sandbox: McpSandbox, tools: dict[str, list[ToolDefinition]]
) -> None:
    """A task naming the wrong repository: the refusal names the allowed one, later calls use it."""
    task = Task(id="git-wrong", metadata={"server": "git", "values": {"repository": ["/srv/repo"]}})
    policy = McpExplorer(tools, invalid_rate=0.0, unknown_tool_rate=0.0, stop_probability=0.0)
    played = episode(sandbox, policy, task, seed=0, steps=8)
    repositories = [a.arguments["arguments"].get("repo_path") for a, _ in played]
    first = repositories.index("/srv/repo")
    assert f"outside the allowed repository '{WORKDIR_IN_SANDBOX}'" in played[first][1].text
    assert WORKDIR_IN_SANDBOX in repositories[first + 1 :], repositories
    assert any(not o.data["is_error"] for _, o in played), [o.text[:200] for _, o in played]


def test_a_blind_explorer_finds_a_working_call(
    sandbox: McpSandbox, tools: dict[str, list[ToolDefinition]]
) -> None:
    """No task values at all: plausible guesses (the working directory) still reach the repository."""
    task = Task(id="git-blind", metadata={"server": "git"})
    policy = McpExplorer(tools, invalid_rate=0.0, unknown_tool_rate=0.0, stop_probability=0.0)
    played = episode(sandbox, policy, task, seed=0, steps=10)
    assert any(not o.data["is_error"] for _, o in played), [a.text for a, _ in played]


def test_same_seed_same_calls(sandbox: McpSandbox, tools: dict[str, list[ToolDefinition]]) -> None:
    policy = McpExplorer(tools)
    for server in ("git", "memory"):
        first = [a.text for a, _ in episode(sandbox, policy, TASKS[server], seed=11, steps=8)]
        again = [a.text for a, _ in episode(sandbox, policy, TASKS[server], seed=11, steps=8)]
        other = [a.text for a, _ in episode(sandbox, policy, TASKS[server], seed=12, steps=8)]
        assert first == again and first != other

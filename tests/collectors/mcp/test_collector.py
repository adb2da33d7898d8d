"""`python -m collectors.mcp` end to end: real servers in bwrap, real fleet, real Parquet."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from collectors.mcp.options import with_tool_lookup
from collectors.policies.llm import LLMPolicy
from collectors.tasks import embedded_tasks
from sandboxes.mcp import McpConfig, McpSandbox
from schemas import read_trajectories
from schemas.records import Trajectory
from tests.collectors.conftest import run_main
from tests.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = Path(__file__).parent / "fixtures"
SERVERS = ("time", "git", "fetch", "filesystem", "memory")


def run_collector(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "collectors.mcp", "--no-progress", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def trajectories(out: Path) -> list[Trajectory]:
    return sorted(read_trajectories(str(out), validate=True), key=lambda t: t.task.metadata["slot"])


def recorded_tool_names(server: str) -> list[str]:
    return [tool["name"] for tool in json.loads((FIXTURES / f"{server}.json").read_text())["tools"]]


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main("mcp", "--help") == 0
    printed = capsys.readouterr().out
    assert "examples:" in printed and "--servers" in printed and "--invalid-rate" in printed


def test_embedded_tasks_cover_every_embedded_server_in_turn() -> None:
    servers = [spec.task.metadata["server"] for spec in embedded_tasks("mcp")]
    assert servers[:5] == list(SERVERS) and Counter(servers) == {s: 3 for s in SERVERS}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--server", "weather"], "--server weather: not in the catalogue"),
        (["--invalid-rate", "0.9", "--unknown-tool-rate", "0.2"], "add up to at most 1"),
        (["--servers", "/nonexistent.toml"], "cannot read the catalogue"),
    ],
)
def test_usage_errors_say_what_to_fix(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main("mcp", *args, "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err
    assert message in err, err[-2000:]


EMBEDDED_ARGS = ["--workers", "2", "--episodes", "10", "--max-steps", "3"]


@pytest.fixture(scope="module")
def embedded_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Two episodes per embedded server, recorded once for the tests below."""
    out = tmp_path_factory.mktemp("mcp") / "data"
    return out, run_collector(*EMBEDDED_ARGS, "--out", str(out))


def test_embedded_defaults_write_valid_trajectories_and_resume(
    embedded_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, result = embedded_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert "listing the tools of 5 MCP server(s)" in result.stderr
    found = trajectories(out)
    assert [t.task.metadata["slot"] for t in found] == list(range(10))
    assert {t.domain for t in found} == {"mcp"} and {t.policy.name for t in found} == {"explorer"}
    assert Counter(t.task.metadata["server"] for t in found) == {s: 2 for s in SERVERS}
    for trajectory in found:
        server = trajectory.task.metadata["server"]
        assert trajectory.initial_observation.text.startswith("Connected to ")
        assert trajectory.initial_observation.data["server"] == server
        assert trajectory.outcome.status in ("completed", "truncated"), trajectory.outcome
        assert 1 <= len(trajectory.steps) <= 3
        for step in trajectory.steps:
            assert step.action.kind == "tool_call" and step.observation.format == "mcp_result"
            assert step.observation.data["server"] == server
    assert "trajectories written: 10" in result.stdout
    again = run_collector(*EMBEDDED_ARGS, "--out", str(out))
    assert again.returncode == 0 and "skipped as already finished: 10" in again.stdout, again.stdout
    assert len(trajectories(out)) == 10


def test_each_trajectory_records_its_own_servers_tools(
    embedded_run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    out, result = embedded_run
    assert result.returncode == 0, result.stderr[-3000:]
    for trajectory in trajectories(out):
        server = trajectory.task.metadata["server"]
        environment = trajectory.environment
        assert environment.config["server"] == server, (trajectory.task.id, environment.config)
        assert [tool.name for tool in environment.tools] == recorded_tool_names(server)
        assert all(tool.input_schema.get("type") == "object" for tool in environment.tools)


def test_a_catalogue_server_without_tasks_gets_an_exploration_task(tmp_path: Path) -> None:
    catalogue = tmp_path / "servers.toml"
    catalogue.write_text(
        '[servers.clock]\ncommand = ["mcp-server-time", "--local-timezone", "Europe/Paris"]\n'
        'package = "pypi:mcp-server-time==2026.10.19"\n'
    )
    out = tmp_path / "data"
    result = run_collector(
        "--servers", str(catalogue), "--episodes", "2", "--max-steps", "3", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = trajectories(out)
    assert {t.task.id for t in found} == {"clock-explore"}
    tools = set(recorded_tool_names("time"))
    assert all(
        s.action.arguments["name"] in tools for t in found for s in t.steps if s.action.kind == "tool_call"
    )


def test_scripted_policy_plays_the_tasks_calls(tmp_path: Path) -> None:
    out = tmp_path / "data"
    result = run_collector(
        "--policy", "scripted", "--server", "memory", "--episodes", "3", "--max-steps", "6", "--out", str(out)
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    tasks = {spec.id: spec for spec in embedded_tasks("mcp")}
    for trajectory in trajectories(out):
        expected = [a["arguments"]["name"] for a in tasks[trajectory.task.id].actions]
        assert [s.action.arguments["name"] for s in trajectory.steps] == expected
        assert not any(s.observation.data["is_error"] for s in trajectory.steps), trajectory.task.id


@pytest.mark.llm
def test_llm_agent_calls_a_real_server_shown_its_tools(llm_server: LLMServer) -> None:
    """The LLM policy as the collector builds it, against a real model and the real time server."""
    # A long timeout: the prompt lists the tools' schemas, and this 2-core machine is shared.
    build = lambda: LLMPolicy(  # noqa: E731
        llm_server.base_url, llm_server.model, max_tokens=40, json_mode=True, timeout=300
    )
    task = next(spec.task for spec in embedded_tasks("mcp") if spec.task.metadata["server"] == "time")
    with McpSandbox(McpConfig()) as sandbox:
        observation = sandbox.reset(task)
        policy = with_tool_lookup(build, {"time": sandbox.describe().tools})()
        policy.reset(task, observation, random.Random(0))
        assert "### get_current_time" in policy.messages("x")[0]["content"]  # type: ignore[attr-defined]
        action = policy.act(observation)
        assert action is None or action.kind in ("tool_call", "invalid"), action
        if action is not None and action.kind == "tool_call":  # whatever the model asked, the server answers
            observation = sandbox.step(action).observation
            assert observation.format == "mcp_result" and observation.data["server"] == "time"

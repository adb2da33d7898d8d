"""`python -m collectors.mcp` with servers that fail, written for the tests: one crashes at start
(its episodes are errors with the reason, the others run), one dies in the middle of a call (the
call is a step saying how), one writes stray stdout (kept in the steps' info)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from schemas.records import Trajectory
from tests.collectors.mcp.test_collector import run_collector, trajectories

SERVERS = Path(__file__).resolve().parents[2] / "sandboxes" / "mcp" / "servers"


def catalogue(path: Path) -> Path:
    servers = {
        name: {"command": [sys.executable, str(SERVERS / script)], "startup_timeout_s": 60}
        for name, script in (("crashy", "crash_at_start.py"), ("faulty", "faulty.py"), ("noisy", "noisy.py"))
    }
    path.write_text(json.dumps({"servers": servers}))
    return path


def task(server: str, tool: str, **arguments: object) -> dict:
    call = {"kind": "tool_call", "arguments": {"name": tool, "arguments": arguments}}
    return {
        "id": f"{server}-{tool}",
        "instruction": f"Call {tool}.",
        "metadata": {"server": server},
        "actions": [call],
    }


@pytest.mark.bwrap
def test_failing_servers_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    specs = [task("crashy", "anything"), task("faulty", "die", code=7), task("noisy", "echo", text="hi")]
    tasks.write_text("".join(json.dumps(spec) + "\n" for spec in specs))
    out = tmp_path / "data"
    result = run_collector(
        "--servers", str(catalogue(tmp_path / "servers.json")), "--tasks", str(tasks),
        "--policy", "scripted", "--episodes", "3", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "MCP server 'crashy' did not start" in result.stderr and "recorded as errors" in result.stderr
    # The crashing server's own traceback, quoted as its reason, and none of the collector's.
    assert result.stderr.count("Traceback") == 1, result.stderr
    assert "outcomes: completed=1, error=2" in result.stdout
    assert "errors by kind: sandbox_crashed=1, sandbox_error=1" in result.stdout
    found: dict[str, Trajectory] = {t.task.metadata["server"]: t for t in trajectories(out)}
    crashy = found["crashy"]
    assert crashy.outcome.status == "error" and not crashy.steps
    assert "did not start" in crashy.outcome.error and "settings.toml is missing" in crashy.outcome.error
    faulty = found["faulty"]
    assert faulty.outcome.status == "error" and faulty.outcome.error_kind == "sandbox_crashed"
    [died] = faulty.steps
    shown = json.loads(died.observation.text)["error"]
    assert shown["code"] == "server_exited" and shown["exit_code"] == 7
    assert "giving up with code 7" in shown["stderr_tail"]
    assert died.info["server_exit"]["exit_code"] == 7
    noisy = found["noisy"]
    assert noisy.outcome.status == "completed"
    assert noisy.steps[0].info["server_output"]["stdout_lines"][-1] == '{"log": "not a JSON-RPC message"}'


@pytest.mark.bwrap
def test_a_run_whose_only_server_does_not_start_fails(tmp_path: Path) -> None:
    servers = tmp_path / "servers.json"
    crashy = {"command": [sys.executable, str(SERVERS / "crash_at_start.py")]}
    servers.write_text(json.dumps({"servers": {"crashy": crashy}}))
    result = run_collector("--servers", str(servers), "--episodes", "2", "--out", str(tmp_path / "data"))
    assert result.returncode == 1, result.stderr[-3000:]
    assert "error: none of the MCP servers started (crashy): nothing to record" in result.stderr

"""Faults and isolation with real servers: a call that times out, a server killed mid-episode, no
network unless the entry asks, streamable HTTP, the local backend, a missing install, and the
sandbox contract (check_sandbox)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.base import SandboxCrashedError, SandboxError
from sandboxes.checks import check_sandbox, process_exists
from sandboxes.http_server import LocalHTTPServer, Request, Response
from sandboxes.mcp import TOOL_CALL, McpConfig, McpSandbox, ServerEntry, embedded_catalogue, parse_action
from sandboxes.terminal.config import LocalBackend
from schemas.records import Observation, Task
from tests.sandboxes.mcp.conftest import TrackedSandbox

HTTP_APP = Path(__file__).with_name("http_app.py")
SLOW_S = 4.0


def _pages(request: Request) -> Response:
    if request.path == "/slow":
        time.sleep(SLOW_S)
    # Plain text: the fetch server returns it as is, without its (slow, Node-based) HTML extraction.
    return Response(200, f"Page {request.path}", "text/plain; charset=utf-8")


@pytest.fixture(scope="module")
def host_site() -> Iterator[LocalHTTPServer]:
    """A site on the host's loopback: reachable from a server with network, not from one without."""
    with LocalHTTPServer({"/": _pages}).start() as server:
        yield server


@pytest.fixture(scope="module")
def faults(installed: None) -> Iterator[TrackedSandbox]:
    embedded = embedded_catalogue()
    fetch = dataclasses.replace(embedded["fetch"], call_timeout_s=2.0)
    catalogue = {
        "time": embedded["time"],
        "fetch": fetch,
        "fetch-offline": dataclasses.replace(fetch, name="fetch-offline", network=False),
        "adder": ServerEntry(
            name="adder",
            command=[sys.executable, str(HTTP_APP), "{port}"],
            transport="http",
            url="http://127.0.0.1:{port}/mcp",
            startup_timeout_s=60,
        ),
    }
    box = TrackedSandbox(McpConfig(catalogue=catalogue))
    box.start()
    yield box
    box.close()
    box.assert_nothing_left()


def call(sandbox: McpSandbox, name: str, **arguments: object) -> Observation:
    return sandbox.step(parse_action(TOOL_CALL, {"name": name, "arguments": arguments})).observation


def server_pid(sandbox: McpSandbox) -> int:
    return next(int(r[4:]) for r in sandbox.resources() if r.startswith("pid:"))


def kill_server(sandbox: McpSandbox) -> None:
    """SIGKILL the server's process (bwrap's monitor: the jail dies with it) and wait until it is
    gone; on a loaded machine its exit can lag, and the server inside would still answer a call."""
    pid = server_pid(sandbox)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while process_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.bwrap
def test_timeout_is_an_observation_and_the_session_goes_on(faults: TrackedSandbox, host_site) -> None:
    faults.reset(Task(id="fetch-slow", metadata={"server": "fetch"}))
    began = time.monotonic()
    slow = call(faults, "fetch", url=host_site.url("/slow"))
    assert time.monotonic() - began < SLOW_S
    assert json.loads(slow.text) == {"error": {"code": "timeout", "message": "no answer within 2 s"}}
    assert (
        slow.data["error"] == {"code": "timeout", "message": "no answer within 2 s"} and slow.data["is_error"]
    )
    # The client's cancel notification stopped the slow request: the next call is answered at once,
    # and with network the server reaches the host's loopback site.
    fine = call(faults, "fetch", url=host_site.url("/fast"))
    assert "Page /fast" in fine.text and fine.data["is_error"] is False


@pytest.mark.bwrap
def test_no_network_unless_the_entry_asks(faults: TrackedSandbox, host_site) -> None:
    faults.reset(Task(id="fetch-offline", metadata={"server": "fetch-offline"}))
    refused = call(faults, "fetch", url=host_site.url("/fast"))
    assert refused.data["is_error"] is True and "Page /fast" not in refused.text
    assert "Failed to fetch" in refused.text, refused.text
    # The server's own embedded site is on the host too, so it is out of reach as well.
    assert faults.describe().config["entry"]["network"] is False


@pytest.mark.bwrap
def test_a_killed_server_crashes_the_episode_and_the_next_reset_works(faults: TrackedSandbox) -> None:
    faults.reset(Task(id="time-1", metadata={"server": "time"}))
    assert call(faults, "get_current_time", timezone="UTC").data["is_error"] is False
    kill_server(faults)
    with pytest.raises(SandboxCrashedError, match="'time' (had )?exited"):
        call(faults, "get_current_time", timezone="UTC")
    assert not faults.alive
    faults.reset(Task(id="time-2", metadata={"server": "time"}))
    assert faults.alive and call(faults, "get_current_time", timezone="UTC").data["is_error"] is False


@pytest.mark.bwrap
def test_streamable_http_server(faults: TrackedSandbox) -> None:
    first = faults.reset(Task(id="adder-1", metadata={"server": "adder"}))
    assert first.text.startswith("Connected to agentworld-test-http ") and first.data["tools"] == ["add"]
    env = faults.describe()
    assert [t.name for t in env.tools] == ["add"] and env.tools[0].input_schema["required"] == ["a", "b"]
    result = json.loads(call(faults, "add", a=2, b=40).text)
    assert result["content"][0]["text"] == "42" and result["isError"] is False
    assert call(faults, "add", a="two", b=1).data["is_error"] is True
    kill_server(faults)
    with pytest.raises(SandboxCrashedError):
        call(faults, "add", a=1, b=1)
    faults.reset(Task(id="adder-2", metadata={"server": "adder"}))
    assert json.loads(call(faults, "add", a=1, b=1).text)["content"][0]["text"] == "2"


@pytest.mark.bwrap
def test_check_sandbox(installed: None) -> None:
    action = parse_action(TOOL_CALL, {"name": "get_current_time", "arguments": {"timezone": "UTC"}})
    unknown = parse_action(TOOL_CALL, {"name": "no_such_tool", "arguments": {}})
    check_sandbox(McpSandbox(), Task(id="time", metadata={"server": "time"}), [action, unknown])


def test_local_backend_only_when_asked(installed: None) -> None:
    with McpSandbox(McpConfig(backend=LocalBackend())) as sandbox:
        sandbox.reset(Task(id="memory", metadata={"server": "memory"}))
        assert sandbox.describe().backend == "local"
        created = call(
            sandbox, "create_entities", entities=[{"name": "X", "entityType": "t", "observations": []}]
        )
        assert created.data["is_error"] is False
    assert McpSandbox().describe().backend == "bwrap"


def test_a_missing_install_says_what_to_run() -> None:
    entry = ServerEntry(name="old-time", command=["mcp-server-time"], package="pypi:mcp-server-time==0.6.2")
    with McpSandbox(McpConfig(catalogue={"old-time": entry}, install_missing=False)) as sandbox:
        with pytest.raises(SandboxError, match="run: python -m sandboxes.mcp install old-time"):
            sandbox.reset(Task(id="old", metadata={"server": "old-time"}))
        with pytest.raises(SandboxError, match="'nope' is not in the catalogue"):
            sandbox.reset(Task(id="none", metadata={"server": "nope"}))


@pytest.mark.bwrap
def test_a_server_that_never_answers_or_exits_at_once_fails_the_reset_in_bounded_time() -> None:
    catalogue = {
        "mute": ServerEntry(name="mute", command=["sleep", "60"], startup_timeout_s=1.0),
        "gone": ServerEntry(name="gone", command=["sh", "-c", "echo no such database >&2; exit 3"]),
    }
    with McpSandbox(McpConfig(catalogue=catalogue)) as sandbox:
        began = time.monotonic()
        with pytest.raises(SandboxError, match="'mute' did not start: .*handshake within 1 s"):
            sandbox.reset(Task(id="mute", metadata={"server": "mute"}))
        with pytest.raises(SandboxError, match="'gone' did not start: .*no such database"):
            sandbox.reset(Task(id="gone", metadata={"server": "gone"}))
        assert time.monotonic() - began < 15
        assert sandbox.resources() == []

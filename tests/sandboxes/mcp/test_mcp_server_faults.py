"""Servers that misbehave, with real MCP server programs written for these tests (servers/): stray
stdout and stderr kept as bounded step diagnostics, a stderr flood, death in the middle of a call
(exit code, signal), a server that ignores SIGTERM, a crash at start, and custom servers whose files
the jail hides (under /tmp) bound or explained."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.base import SandboxCrashedError, SandboxError, StepResult
from sandboxes.mcp import TOOL_CALL, McpConfig, McpSandbox, ServerEntry, parse_action
from sandboxes.mcp.server_output import STEP_STDERR_BYTES
from sandboxes.terminal.config import LocalBackend
from schemas.records import Observation, Task
from tests.sandboxes.mcp.conftest import TrackedSandbox

SERVERS = Path(__file__).with_name("servers")
FAULTY = ServerEntry(
    name="faulty", command=[sys.executable, str(SERVERS / "faulty.py")], startup_timeout_s=60
)
STUBBORN = dataclasses.replace(FAULTY, name="stubborn", command=[*FAULTY.command, "--ignore-term"])
NOISY = ServerEntry(name="noisy", command=[sys.executable, str(SERVERS / "noisy.py")])
CRASHY = ServerEntry(name="crashy", command=[sys.executable, str(SERVERS / "crash_at_start.py")])
GRACE_S = 0.5


def call(sandbox: McpSandbox, name: str, **arguments: object) -> StepResult:
    return sandbox.step(parse_action(TOOL_CALL, {"name": name, "arguments": arguments}))


def failed_call(
    sandbox: McpSandbox, name: str, **arguments: object
) -> tuple[SandboxCrashedError, StepResult]:
    with pytest.raises(SandboxCrashedError) as raised:
        call(sandbox, name, **arguments)
    assert raised.value.result is not None, "a failed call must carry its step"
    return raised.value, raised.value.result


@pytest.fixture(scope="module")
def faulty() -> Iterator[TrackedSandbox]:
    box = TrackedSandbox(McpConfig(catalogue={"faulty": FAULTY}))
    box.start()
    yield box
    box.close()
    box.assert_nothing_left()


def reset(sandbox: McpSandbox, server: str = "faulty") -> Observation:
    return sandbox.reset(Task(id=server, metadata={"server": server}))


@pytest.mark.bwrap
def test_stray_stdout_is_a_step_diagnostic_not_tool_output() -> None:
    with McpSandbox(McpConfig(catalogue={"noisy": NOISY})) as sandbox:
        assert reset(sandbox, "noisy").data["tools"] == ["echo"]
        first = call(sandbox, "echo", text="hello")
        second = call(sandbox, "echo", text="again")
    assert json.loads(first.observation.text) == {
        "content": [{"type": "text", "text": "hello"}],
        "isError": False,
    }
    # The banner (before the handshake) and the call's two stray lines, in order.
    assert first.info["server_output"] == {
        "stdout_lines": [
            "noisy server 1.0 listening on stdio",
            "calling echo",
            '{"log": "not a JSON-RPC message"}',
        ],
        "stdout_line_count": 3,
        "stdout_line_bytes": 36 + 13 + 34,
    }
    assert second.info["server_output"]["stdout_lines"] == [
        "calling echo",
        '{"log": "not a JSON-RPC message"}',
    ]
    assert "calling" not in second.observation.text


@pytest.mark.bwrap
def test_stderr_is_a_step_diagnostic(faulty: TrackedSandbox) -> None:
    reset(faulty)
    first = call(faulty, "echo", text="hello")
    assert json.loads(first.observation.text)["content"] == [{"type": "text", "text": "hello"}]
    output = first.info["server_output"]
    # What the server wrote while starting (its stdout banner, before the SDK serves) comes first.
    assert output["stdout_lines"] == ["faulty server starting (a stray banner on stdout)"]
    assert "faulty server: stderr banner" in output["stderr"]
    assert output["stderr"].endswith("echo called with 5 characters\n")
    second = call(faulty, "echo", text="abc")
    assert second.info["server_output"] == {
        "stderr": "echo called with 3 characters\n",
        "stderr_bytes": 30,
        "stderr_dropped_bytes": 0,
    }
    assert "echo called" not in second.observation.text


@pytest.mark.bwrap
def test_a_stderr_flood_is_bounded(faulty: TrackedSandbox) -> None:
    reset(faulty)
    call(faulty, "echo", text="")  # takes the start-up output
    began = time.monotonic()
    flooded = call(faulty, "flood", megabytes=16)
    assert time.monotonic() - began < 30
    assert json.loads(flooded.observation.text)["content"][0]["text"] == "flooded"
    output = flooded.info["server_output"]
    total = 16 * 1024 * 1024 + len("flood finished\n")
    assert output["stderr_bytes"] == total
    assert len(output["stderr"]) == STEP_STDERR_BYTES and output["stderr"].endswith("flood finished\n")
    assert output["stderr_dropped_bytes"] == total - STEP_STDERR_BYTES
    assert call(faulty, "echo", text="after").observation.data["is_error"] is False


@pytest.mark.bwrap
def test_death_mid_call_is_a_step_with_the_exit_code_and_stderr_tail(faulty: TrackedSandbox) -> None:
    reset(faulty)
    error, step = failed_call(faulty, "die", code=7)
    assert "'faulty' exited during the call to 'die'" in str(error) and "giving up with code 7" in str(error)
    shown = json.loads(step.observation.text)["error"]
    assert shown["code"] == "server_exited" and shown["exit_code"] == 7 and shown["signal"] is None
    assert shown["message"] == "the MCP server exited during the call: exit code 7"
    assert shown["stderr_tail"].endswith("fatal: giving up with code 7")
    assert step.observation.data["is_error"] is True
    assert step.info["server_exit"]["exit_code"] == 7
    assert "giving up with code 7" in step.info["server_output"]["stderr"]
    assert not faulty.alive
    # The next step, still without a reset, fails the same way without sending the call.
    error, step = failed_call(faulty, "echo", text="x")
    assert json.loads(step.observation.text)["error"]["message"].startswith(
        "the MCP server had exited before"
    )


@pytest.mark.bwrap
def test_death_by_signal_names_the_signal(faulty: TrackedSandbox) -> None:
    reset(faulty)
    _, step = failed_call(faulty, "die_by_signal")
    shown = json.loads(step.observation.text)["error"]
    # bwrap reports a child killed by signal N as exit code 128 + N.
    assert shown["signal"] == "SIGKILL" and shown["exit_code"] == 137
    assert shown["stderr_tail"].endswith("about to be killed")


def test_death_by_signal_on_the_local_backend() -> None:
    config = McpConfig(catalogue={"faulty": FAULTY}, backend=LocalBackend())
    with McpSandbox(config) as sandbox:
        reset(sandbox)
        _, step = failed_call(sandbox, "die_by_signal")
    shown = json.loads(step.observation.text)["error"]
    assert shown["signal"] == "SIGKILL" and shown["exit_code"] is None
    assert shown["message"].endswith("during the call: killed by SIGKILL")


@pytest.mark.bwrap
def test_a_server_that_ignores_sigterm_is_killed_and_that_is_recorded() -> None:
    config = McpConfig(catalogue={"faulty": FAULTY, "stubborn": STUBBORN}, stop_grace_s=GRACE_S)
    sandbox = TrackedSandbox(config)
    sandbox.start()
    reset(sandbox, "stubborn")
    assert call(sandbox, "echo", text="x").observation.data["is_error"] is False
    began = time.monotonic()
    reset(sandbox, "faulty")  # replaces the stubborn server
    assert time.monotonic() - began >= GRACE_S
    stop = sandbox.describe().config["replaced_server_stop"]
    assert stop["server"] == "stubborn" and stop["signals"] == ["SIGTERM", "SIGKILL"]
    assert stop["escalated"] == f"SIGTERM ignored for {GRACE_S:g} s: SIGKILL"
    assert stop["exit"]["signal"] == "SIGKILL"
    # A server that honours SIGTERM needs nothing more.
    sandbox.close()
    assert sandbox.last_stop is not None and sandbox.last_stop["server"] == "faulty"
    assert sandbox.last_stop["signals"] == ["SIGTERM"] and "escalated" not in sandbox.last_stop
    sandbox.assert_nothing_left()


@pytest.mark.bwrap
def test_a_crash_at_start_says_how_and_why() -> None:
    with McpSandbox(McpConfig(catalogue={"crashy": CRASHY})) as sandbox:
        with pytest.raises(SandboxError) as raised:
            reset(sandbox, "crashy")
        assert sandbox.resources() == []
    message = str(raised.value)
    assert message.startswith("MCP server 'crashy' did not start: ")
    assert "(exit code 1)" in message
    assert "settings file /etc/agentworld-test/settings.toml is missing" in message
    assert "sandboxes.mcp install" not in message and "It ran in bwrap" not in message  # not a missing file


def write_server_with_a_helper(root: Path) -> tuple[Path, Path]:
    """A server script and the directory of a module it imports, both under `root` (in /tmp)."""
    (root / "lib").mkdir()
    (root / "lib" / "greeting.py").write_text('WORDS = "hello from a helper"\n')
    script = root / "server.py"
    script.write_text(
        "from greeting import WORDS\n"
        "from mcp.server.mcpserver import MCPServer\n"
        "server = MCPServer('helper')\n"
        "@server.tool()\n"
        "def greet() -> str:\n"
        "    return WORDS\n"
        "server.run('stdio')\n"
    )
    return script, root / "lib"


@pytest.mark.bwrap
def test_a_custom_server_under_tmp_runs_with_its_files_bound(tmp_path: Path) -> None:
    assert str(tmp_path).startswith("/tmp/")
    copy = tmp_path / "faulty.py"
    shutil.copy(SERVERS / "faulty.py", copy)
    entry = ServerEntry(name="mine", command=[sys.executable, str(copy)], startup_timeout_s=60)
    with McpSandbox(McpConfig(catalogue={"mine": entry})) as sandbox:
        reset(sandbox, "mine")
        assert json.loads(call(sandbox, "echo", text="ok").observation.text)["content"][0]["text"] == "ok"


@pytest.mark.bwrap
def test_files_the_jail_hides_are_named_with_how_to_expose_them(tmp_path: Path) -> None:
    script, lib = write_server_with_a_helper(tmp_path)
    hidden = ServerEntry(
        name="helper",
        command=[sys.executable, str(script)],
        env={"PYTHONPATH": str(lib)},
        startup_timeout_s=60,
    )
    with McpSandbox(McpConfig(catalogue={"helper": hidden})) as sandbox:
        with pytest.raises(SandboxError) as raised:
            reset(sandbox, "helper")
    message = str(raised.value)
    assert "No module named 'greeting'" in message
    assert "It ran in bwrap" in message and "shows of the host only its system directories" in message
    assert f"Paths of the entry the server cannot see there: {lib}." in message
    assert "ro_paths" in message and "--backend local" in message
    assert "sandboxes.mcp install" not in message
    bound = dataclasses.replace(hidden, ro_paths=[str(lib)])
    with McpSandbox(McpConfig(catalogue={"helper": bound})) as sandbox:
        reset(sandbox, "helper")
        assert "hello from a helper" in call(sandbox, "greet").observation.text

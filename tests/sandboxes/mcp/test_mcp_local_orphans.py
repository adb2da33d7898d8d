"""An MCP server on the local backend that ignores SIGTERM, with children that ignore it too (a
plain one, a setsid'd one, a double-forked one): none of them outlives close(), with a cgroup box
and with the subreaper launcher (forced by declaring cgroups unusable)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sandboxes import containment
from sandboxes.mcp import McpConfig, McpSandbox, ServerEntry
from sandboxes.terminal.config import LocalBackend
from schemas.records import Task
from tests.sandboxes.test_containment import survivors, wait_for_pids

SERVER = Path(__file__).resolve().parents[2] / "collectors" / "spawning_mcp_server.py"


@pytest.mark.parametrize("mode", ["cgroup", "subreaper"])
def test_a_stubborn_server_and_its_children_end_at_close(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode == "subreaper":
        monkeypatch.setattr(containment, "cgroups_unusable", lambda: "forced by the test")
    elif containment.cgroups_unusable() is not None:
        pytest.fail(f"cgroup boxes need root and cgroup v2: {containment.cgroups_unusable()}")
    pids = tmp_path / "pids"
    # -I: the server's directory (next to tests/collectors/mcp/) must not shadow the mcp package.
    entry = ServerEntry(name="spawning", command=[sys.executable, "-I", str(SERVER), str(pids)])
    sandbox = McpSandbox(McpConfig(catalogue={"spawning": entry}, backend=LocalBackend()))
    with sandbox:
        sandbox.reset(Task(id="t", metadata={"server": "spawning"}))
        started = wait_for_pids(pids, 4)
        assert len(survivors(started, within=0.0)) == 4, "the server and its children run"
    assert not survivors(started, within=2.0)

"""`python -m sandboxes.serve` as a user runs it: the startup line, the token beyond loopback (refused
without one; with one, 401 without the header and 200 with it, on HTTP and the WebSocket handshake),
/schema and /metadata, an episode to its reward, and the summary on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from openenv.core.generic_client import GenericEnvClient

from sandboxes.serve.__main__ import main
from sandboxes.serve.auth import TOKEN_ENV, TokenRequiredError, check_bind
from sandboxes.serve.client import connect
from tests.sandboxes.serve.conftest import call

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]
TOKEN = "test-token-7f3a"


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


@contextmanager
def cli(*args: str, env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen]]:
    """The server as a subprocess on a free port: (base URL from its startup line, the process)."""
    argv = [sys.executable, "-m", "sandboxes.serve", *args, "--port", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()  # blocks until the server accepts connections (or exits)
        assert line.startswith("serving "), f"no startup line: {line!r}\n{proc.stderr.read()[-3000:]}"
        yield line.split(" on ", 1)[1].strip(), proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_non_loopback_address_needs_a_token(tmp_path) -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.5"):
        check_bind(host, None)
    for host in ("0.0.0.0", "::", "10.1.2.3", "example.org"):
        with pytest.raises(TokenRequiredError, match=TOKEN_ENV):
            check_bind(host, None)
        check_bind(host, TOKEN)
    done = subprocess.run(
        [sys.executable, "-m", "sandboxes.serve", "--domain", "terminal", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(),
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "refusing to listen on 0.0.0.0 without a token" in done.stderr
    assert TOKEN_ENV in done.stderr and "--token" in done.stderr


def test_the_cli_serves_with_a_token_and_prints_a_summary_on_sigterm() -> None:
    args = ("--domain", "terminal", "--host", "0.0.0.0", "--max-sessions", "3", "--idle-timeout", "60")
    with cli(*args, env=environment(**{TOKEN_ENV: TOKEN})) as (url, proc):
        assert url.startswith("http://0.0.0.0:")
        url = url.replace("0.0.0.0", "127.0.0.1")
        assert call("GET", f"{url}/health") == (200, {"status": "healthy"})
        status, body = call("GET", f"{url}/schema")
        assert status == 401 and "Authorization: Bearer" in body["detail"]
        assert call("GET", f"{url}/schema", token="wrong")[0] == 401
        assert call("POST", f"{url}/sessions")[0] == 401
        status, schema = call("GET", f"{url}/schema", token=TOKEN)
        assert status == 200 and {"kind", "arguments"} <= set(schema["action"]["properties"])
        assert {"domain", "task_id", "simulated", "reward"} <= set(schema["state"]["properties"])
        status, metadata = call("GET", f"{url}/metadata", token=TOKEN)
        assert status == 200 and metadata["name"] == "agentworld-terminal"
        assert '{"command": "ls -la"}' in metadata["description"]  # the domain's action space
        assert call("POST", f"{url}/reset", {}, token=TOKEN)[0] == 404  # openenv's stateless routes

        with pytest.raises(ConnectionError, match="HTTP 401"):
            GenericEnvClient(base_url=url).sync().connect()  # openenv's client cannot send the header
        with pytest.raises(ConnectionError, match="HTTP 401.*wants a bearer token"):
            connect(url, token=None).sync().connect()
        with connect(url, token=TOKEN).sync() as env:
            assert env.reset(task_id="files-mkdir-tree").observation["instruction"]
            env.step({"kind": "command", "arguments": {"command": "mkdir -p tool/src tool/tests tool/docs"}})
            assert env.step({"kind": "done"}).reward == 1.0
        status, opened = call("POST", f"{url}/sessions", token=TOKEN)
        assert status == 201  # left open: closed at shutdown

        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    assert time.monotonic() - started < 30
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("stopped: sessions opened 2, refused 0, reclaimed idle 0")
    assert "closed by clients 1, closed at shutdown 1; episodes ended 1, mean reward 1.000" in summary


def test_bad_arguments_are_refused_before_serving(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a"}\n{"id": 3}\n')
    refused = {
        ("--domain", "web", "--backend", "docker"): "--backend applies to the terminal only",
        ("--domain", "terminal", "--simulator-model", "m"): "--simulator-model needs --simulator URL",
        ("--domain", "terminal", "--tasks", str(tasks)): f"{tasks}:2: ",
        ("--domain", "terminal", "--tasks", str(tmp_path / "none.jsonl")): "No such file",
        ("--domain", "terminal", "--sandbox-config", "[1]"): "--sandbox-config must be a JSON object",
        ("--domain", "terminal", "--max-sessions", "0"): "max_sessions must be at least 1",
        ("--domain", "mcp"): "cannot build a mcp sandbox: this MCP environment records no server entry",
    }
    for argv, message in refused.items():
        assert main([*argv, "--port", "0"]) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("error: ") and message in err, (argv, err)

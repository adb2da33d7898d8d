"""A client killed with SIGKILL mid-episode: its WebSocket drops without a goodbye, and the server
reclaims the session at once: the docker container and every process of the sandbox are gone. Killed
mid-step (a `sleep 100` allowed 600 s), or closing its WebSocket mid-step, the step is interrupted:
its sandbox closed and its slot free within 5 s, and nothing logged as an error."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi import FastAPI
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from sandboxes.serve.pool import SessionPool
from sandboxes.serve.server import build_app, real_sandbox_factory
from sandboxes.tasks import embedded_tasks
from tests.sandboxes.serve.conftest import Recorder, call, pool_of, recording, serving, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.tmux]

# openenv's WebSocket protocol spoken directly (openenv's own client takes seconds to import):
# reset, one step that leaves a process running in the container, then wait to be killed.
CLIENT = """
import json, sys, time
from websockets.sync.client import connect
ws = connect(sys.argv[1], proxy=None)
ws.send(json.dumps({"type": "reset", "data": {"task_id": "files-create-notes"}}))
assert json.loads(ws.recv())["type"] == "observation"
step = {"kind": "command", "arguments": {"command": "sleep 600 & echo started"}}
ws.send(json.dumps({"type": "step", "data": step}))
assert "started" in json.loads(ws.recv())["data"]["observation"]["text"]
print("READY", flush=True)
time.sleep(600)
"""


# The same, but the step it leaves running is a long one: the client is killed while it runs.
MID_STEP_CLIENT = """
import json, sys, time
from websockets.sync.client import connect
ws = connect(sys.argv[1], proxy=None)
ws.send(json.dumps({"type": "reset", "data": {"task_id": "files-create-notes"}}))
assert json.loads(ws.recv())["type"] == "observation"
step = {"kind": "command", "arguments": {"command": "sleep 100", "timeout": 600}}
ws.send(json.dumps({"type": "step", "data": step}))
print("READY", flush=True)
time.sleep(600)
"""
STEP_LIMIT_S = 5.0  # from the client's end to its sandbox closed and its slot free


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING or record.exc_info:
            self.lines.append(self.format(record))


@contextmanager
def server_log() -> Iterator[list[str]]:
    """What the server logs at WARNING or above, or with a traceback, while the block runs (uvicorn's
    loggers do not propagate to the root: the handler goes on them too)."""
    kept = _Kept()
    loggers = [logging.getLogger(name) for name in ("", "uvicorn", "uvicorn.error", "asyncio")]
    for each in loggers:
        each.addHandler(kept)
    try:
        yield kept.lines
    finally:
        for each in loggers:
            each.removeHandler(kept)


def _terminal_app(recorder: Recorder, **options: Any) -> FastAPI:
    return build_app(recorder, [s.task for s in embedded_tasks("terminal")], domain="terminal", **options)


@contextmanager
def _client(script: str, url: str) -> Iterator[subprocess.Popen]:
    """A client process running `script` against the server's WebSocket, once it printed READY; killed
    at the end if the test has not killed it."""
    client = subprocess.Popen(
        [sys.executable, "-c", script, url.replace("http", "ws") + "/ws"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = client.stdout.readline()
        assert line.strip() == "READY", f"the client failed: {line!r} {client.stderr.read()[-2000:]}"
        yield client
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()


@contextmanager
def _mid_step(url: str, pool: SessionPool) -> Iterator[ClientConnection]:
    """A WebSocket session half a second into a step (`sleep 100`, allowed 600 s)."""
    with ws_connect(url.replace("http", "ws") + "/ws", proxy=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task_id": "files-create-notes"}}))
        assert json.loads(ws.recv(timeout=60))["type"] == "observation"
        step = {"kind": "command", "arguments": {"command": "sleep 100", "timeout": 600}}
        ws.send(json.dumps({"type": "step", "data": step}))
        wait_for(lambda: pool.calls_in_flight == 1, 30, "the step to run")
        time.sleep(0.5)
        yield ws


def _reclaimed_within(pool, recorder: Recorder, url: str, started: float) -> float:
    """Seconds from `started` until the session's slot is free (a new session opens on this one-slot
    server) and every process of its sandbox is gone."""
    wait_for(lambda: pool.active_sessions == 0 and not recorder.leaked(), 30, "the session to be reclaimed")
    took = time.monotonic() - started
    status, opened = call("POST", f"{url}/sessions")
    assert status == 201, opened
    assert call("DELETE", f"{url}/sessions/{opened['session_id']}")[0] == 200
    return took


def test_a_client_killed_mid_step_frees_its_sandbox_and_slot_within_5_s(recorder: Recorder) -> None:
    app = _terminal_app(recorder, max_sessions=1)
    pool = pool_of(app)
    with serving(app) as url, server_log() as logged:
        with _client(MID_STEP_CLIENT, url) as client:
            wait_for(lambda: pool.calls_in_flight == 1, 30, "the step to run")
            time.sleep(0.5)  # well into its `sleep 100`
            assert pool.calls_in_flight == 1 and recorder.held(), "the step runs, its sandbox held"
            client.send_signal(signal.SIGKILL)
            started = time.monotonic()
            client.wait(timeout=10)
        took = _reclaimed_within(pool, recorder, url, started)
        assert took <= STEP_LIMIT_S, f"reclaimed {took:.2f} s after the kill"
        wait_for(lambda: pool.calls_in_flight == 0, 10, "the interrupted step to return")
    assert app.state.stats.counts["disconnected"] == 1
    assert logged == [], "\n".join(logged)


def test_a_websocket_closed_mid_step_frees_its_sandbox_and_slot_within_5_s(recorder: Recorder) -> None:
    app = _terminal_app(recorder, max_sessions=1)
    pool = pool_of(app)
    with serving(app) as url, server_log() as logged:
        with _mid_step(url, pool) as ws:
            ws.close()  # a clean close frame, mid-step
            started = time.monotonic()
        took = _reclaimed_within(pool, recorder, url, started)
        assert took <= STEP_LIMIT_S, f"reclaimed {took:.2f} s after the close"
    assert app.state.stats.counts["disconnected"] == 1
    assert logged == [], "\n".join(logged)


@pytest.fixture
def docker_recorder(terminal_image: str, need_tools) -> Iterator[Recorder]:
    need_tools("tmux")
    with recording(real_sandbox_factory("terminal", "docker")) as made:
        yield made


def containers(resources: set[str]) -> list[str]:
    return sorted(r.split(":", 1)[1] for r in resources if r.startswith("container:"))


def test_a_killed_client_leaves_no_container_and_no_process(docker_recorder: Recorder) -> None:
    recorder = docker_recorder
    app = _terminal_app(recorder)
    pool = pool_of(app)
    with serving(app) as url, server_log() as logged:
        with _client(CLIENT, url) as client:
            held = recorder.held()
            (container,) = containers(held)
            assert pool.active_sessions == 1
            running = subprocess.run(
                ["docker", "ps", "-q", "--no-trunc", "--filter", f"id={container}"],
                capture_output=True,
                text=True,
            )
            assert running.stdout.strip(), "the session's container runs while its client holds it"
            client.send_signal(signal.SIGKILL)
            client.wait(timeout=10)
        wait_for(lambda: pool.active_sessions == 0, 20, "the dropped session to be reclaimed")
        wait_for(lambda: not recorder.leaked(), 20, "the sandbox's container and processes to go")
        # Nothing left under any state: not running, not stopped.
        every = ["docker", "ps", "-aq", "--no-trunc", "--filter", f"id={container}"]
        listed = subprocess.run(every, capture_output=True, text=True)
        assert listed.returncode == 0 and listed.stdout.strip() == ""
        pids = [int(r.split(":", 1)[1]) for r in held if r.startswith("pid:")]
        table = subprocess.run(["ps", "-eo", "pid=,stat="], capture_output=True, text=True).stdout
        rows = (row.split() for row in table.splitlines())
        live = {int(pid) for pid, stat in rows if not stat.startswith("Z")}  # a zombie has ended
        assert pids and not set(pids) & live, "a process of the sandbox still runs"
        assert app.state.stats.counts["disconnected"] == 1
    assert logged == [], "\n".join(logged)


def test_openenv_close_mid_step_ends_the_session_at_once(recorder: Recorder) -> None:
    """openenv's own goodbye (`{"type": "close"}`) sent while a step runs: the step is not awaited."""
    app = _terminal_app(recorder, max_sessions=1)
    pool = pool_of(app)
    with serving(app) as url, server_log() as logged:
        with _mid_step(url, pool) as ws:
            ws.send(json.dumps({"type": "close"}))
            started = time.monotonic()
            answer = json.loads(ws.recv(timeout=10))  # the step's answer: it ended with the session
            assert (
                answer["type"] == "error"
                and "closed the session during the call" in answer["data"]["message"]
            )
        took = _reclaimed_within(pool, recorder, url, started)
        assert took <= STEP_LIMIT_S, f"reclaimed {took:.2f} s after the close message"
    assert app.state.stats.counts["closed"] == 2  # this one, and the probe session _reclaimed_within opens
    assert logged == [], "\n".join(logged)

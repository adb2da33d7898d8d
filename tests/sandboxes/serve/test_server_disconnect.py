"""A client killed with SIGKILL mid-episode: its WebSocket drops without a goodbye, and the server
reclaims the session at once: the docker container and every process of the sandbox are gone."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from sandboxes.serve.server import build_app, real_sandbox_factory
from sandboxes.tasks import embedded_tasks
from tests.sandboxes.serve.conftest import Recorder, pool_of, serving, wait_for

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


@pytest.fixture
def recorder(terminal_image: str, need_tools) -> Iterator[Recorder]:
    need_tools("tmux")
    made = Recorder(real_sandbox_factory("terminal", "docker"))
    yield made
    assert not made.leaked(), f"sandbox resources survived: {made.leaked()}"


def containers(resources: set[str]) -> list[str]:
    return sorted(r.split(":", 1)[1] for r in resources if r.startswith("container:"))


def test_a_killed_client_leaves_no_container_and_no_process(recorder: Recorder) -> None:
    app = build_app(recorder, [s.task for s in embedded_tasks("terminal")], domain="terminal")
    pool = pool_of(app)
    with serving(app) as url:
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, url.replace("http", "ws") + "/ws"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            line = client.stdout.readline()
            assert line.strip() == "READY", f"the client failed: {line!r} {client.stderr.read()[-2000:]}"
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
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
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

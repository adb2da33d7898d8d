"""The leases around openenv's WebSocket handler: sessions opened at the same moment each get their own
environment (the one openenv's handler uses for that connection), and a session the server reclaimed
keeps its socket to tell every later call why, while its slot is already free for someone else."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from sandboxes.serve.server import build_app
from sandboxes.tasks import embedded_tasks
from tests.sandboxes.serve.conftest import Recorder, call, pool_of, serving, wait_for

SESSIONS = 4


def ask(ws: ClientConnection, kind: str, data: dict | None = None) -> dict:
    message = {"type": kind} if data is None else {"type": kind, "data": data}  # state takes no data
    ws.send(json.dumps(message))
    return json.loads(ws.recv(timeout=60))


@pytest.mark.bwrap
@pytest.mark.tmux
def test_sessions_opened_at_once_each_get_their_own_environment(recorder: Recorder) -> None:
    tasks = [spec.task for spec in embedded_tasks("terminal")]
    app = build_app(recorder, tasks, domain="terminal", max_sessions=SESSIONS)
    pool = pool_of(app)
    task_ids = sorted(task.id for task in tasks)[:SESSIONS]
    with serving(app) as url, ExitStack() as held, ThreadPoolExecutor(SESSIONS) as threads:
        start = threading.Barrier(SESSIONS)

        def open_one(_: int) -> ClientConnection:
            start.wait()  # every handshake at the same moment
            ws = held.enter_context(ws_connect(url.replace("http", "ws") + "/ws", proxy=None))
            assert ask(ws, "state")["type"] == "state"
            return ws

        sockets = list(threads.map(open_one, range(SESSIONS), timeout=60))
        leases = list(pool.leases.values())
        assert len(leases) == SESSIONS and len({id(lease.env) for lease in leases}) == SESSIONS
        with ws_connect(url.replace("http", "ws") + "/ws", proxy=None) as over:
            refused = ask(over, "state")
        assert refused["data"]["code"] == "CAPACITY_REACHED" and refused["data"]["max_sessions"] == SESSIONS
        for ws, task_id in zip(sockets, task_ids, strict=True):
            assert ask(ws, "reset", {"task_id": task_id})["type"] == "observation"
        # The lease a connection's close ends holds that connection's environment: the others keep
        # theirs, each bound to the task its own connection reset.
        sockets[0].close()
        wait_for(lambda: pool.active_sessions == SESSIONS - 1, 10, "the closed session to end")
        left = sorted(lease.env.state.task_id for lease in pool.leases.values())
        assert left == task_ids[1:]
        assert len(pool.session_resources()) == SESSIONS - 1
    assert app.state.stats.counts["opened"] == SESSIONS and app.state.stats.counts["refused"] == 1


def test_a_reclaimed_websocket_tells_each_later_call_why_until_it_closes(recorder: Recorder) -> None:
    tasks = [spec.task for spec in embedded_tasks("terminal")]
    app = build_app(recorder, tasks, domain="terminal", max_sessions=1, idle_timeout_s=0.5)
    pool = pool_of(app)
    with serving(app) as url, ws_connect(url.replace("http", "ws") + "/ws", proxy=None) as ws:
        assert ask(ws, "state")["data"]["domain"] == "terminal"
        wait_for(lambda: pool.active_sessions == 0, 10, "the idle session to be reclaimed")
        # Its one slot is free at once, the old socket still open.
        status, opened = call("POST", f"{url}/sessions")
        assert status == 201
        for kind, data in (("state", None), ("step", {"kind": "done"})):
            answer = ask(ws, kind, data)
            assert answer["type"] == "error" and "lease of 0.5 s" in answer["data"]["message"]
            assert "new WebSocket" in answer["data"]["message"]
        ws.send(json.dumps({"type": "close"}))
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
        assert call("DELETE", f"{url}/sessions/{opened['session_id']}")[0] == 200
    assert app.state.stats.counts["expired"] == 1 and recorder.made == []

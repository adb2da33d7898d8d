"""The OpenEnv server on real bwrap terminals: openenv-core's own GenericEnvClient plays a task to its
verifier's reward over /ws; HTTP sessions do the same; malformed requests, unknown sessions, expired
leases and a full server are refused with answers that say what to do; idle sandboxes are reclaimed."""

from __future__ import annotations

import json
import time

import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect as ws_connect

from sandboxes.serve.server import build_app
from sandboxes.tasks import TaskSpec, embedded_tasks
from tests.sandboxes.serve.conftest import Recorder, call, pool_of, serving, wait_for

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]
TASK = "files-create-notes"  # a command verifier: test "$(wc -l < notes.txt)" -eq 3


@pytest.fixture(scope="module")
def specs() -> dict[str, TaskSpec]:
    return {spec.id: spec for spec in embedded_tasks("terminal")}


def as_action(scripted: dict) -> dict:
    """A task file's scripted action as a served action {kind, arguments}."""
    if "kind" in scripted:
        return {"kind": scripted["kind"], "arguments": scripted.get("arguments", {})}
    if "command" in scripted:
        return {"kind": "command", "arguments": dict(scripted)}
    return {"kind": "keystrokes", "arguments": dict(scripted)}


def test_openenv_client_plays_a_task_to_its_verifier_reward(specs, recorder: Recorder) -> None:
    app = build_app(recorder, [s.task for s in specs.values()], domain="terminal", max_sessions=2)
    with serving(app) as url, GenericEnvClient(base_url=url).sync() as env:
        first = env.reset(task_id=TASK)
        assert not first.done and first.reward is None
        assert "notes" in first.observation["instruction"]
        assert first.observation["format"] == "terminal_screen"
        assert recorder.held(), "a reset sandbox holds processes"
        for scripted in specs[TASK].actions:
            result = env.step(as_action(scripted))
            assert not result.done and result.observation["error"] is None
        assert "third" in result.observation["text"]  # the scripted `cat notes.txt`
        refused = env.step({"kind": "fly", "arguments": {}})
        assert "unknown terminal action kind 'fly'" in refused.observation["error"]
        last = env.step({"kind": "done"})
        assert last.done and last.reward == 1.0
        # the verifier's own account travels with it (openenv's wire format drops `metadata`)
        verdict = last.observation["verification"]
        assert verdict["verifier"] == "command" and verdict["reward"] == 1.0 and verdict["details"]
        assert last.observation["task_id"] == TASK
        state = env.state()
        assert state["task_id"] == TASK and state["done"] and state["reward"] == 1.0
        assert state["environment"]["backend"] == "bwrap" and not state["simulated"]
        # The same session, a new episode in which nothing is done: the verifier gives 0, not 1.
        env.reset(task_id=TASK)
        assert env.step({"kind": "done"}).reward == 0.0
    wait_for(lambda: not pool_of(app).session_resources(), 20, "the closed session to leave the table")
    stats = app.state.stats
    assert stats.counts["opened"] == 1 and stats.counts["closed"] == 1 and stats.rewards == [1.0, 0.0]


def test_http_sessions_play_an_episode_and_say_what_is_wrong(specs, recorder: Recorder) -> None:
    app = build_app(recorder, [s.task for s in specs.values()], domain="terminal", max_sessions=2)
    with serving(app) as url:
        status, opened = call("POST", f"{url}/sessions")
        assert status == 201 and opened["lease_s"] == 300.0
        sid = opened["session_id"]
        base = f"{url}/sessions/{sid}"
        status, body = call("POST", f"{base}/step", {"action": {"kind": "command", "arguments": {}}})
        assert status == 409 and "send reset before step" in body["detail"]
        status, body = call("POST", f"{base}/reset", {"task_id": "no-such-task"})
        assert status == 422 and "unknown task_id 'no-such-task'" in body["detail"]
        status, body = call("POST", f"{base}/reset", {"seed": "x", "colour": 1})
        assert status == 422 and "seed:" in body["detail"] and "colour: Extra inputs" in body["detail"]
        status, body = call("POST", f"{base}/reset", raw=b"{not json")
        assert status == 400 and "not JSON" in body["detail"]

        status, body = call("POST", f"{base}/reset", {"task_id": TASK})
        assert status == 200 and body["done"] is False and "notes" in body["observation"]["instruction"]
        status, body = call("POST", f"{base}/step", {"command": "ls"})
        assert status == 422 and '{"action": {"kind"' in body["detail"] and "['command']" in body["detail"]
        status, body = call("POST", f"{base}/step", {"action": {"arguments": {}, "colour": 1}})
        assert status == 422
        assert "action.kind: Field required" in body["detail"] and "action.colour" in body["detail"]
        status, body = call("POST", f"{base}/step", {"action": {"kind": "command"}, "verbose": True})
        assert status == 422 and "unknown field(s) ['verbose']" in body["detail"]
        for scripted in specs[TASK].actions:
            status, body = call("POST", f"{base}/step", {"action": as_action(scripted)})
            assert status == 200 and body["observation"]["error"] is None
        status, body = call("POST", f"{base}/step", {"action": {"kind": "done"}})
        assert status == 200 and body["done"] is True and body["reward"] == 1.0
        status, state = call("GET", f"{base}/state")
        assert status == 200 and state["reward"] == 1.0 and state["step_count"] == 2
        status, body = call("POST", f"{base}/step", {"action": {"kind": "done"}})
        assert status == 409 and "send reset" in body["detail"]

        assert call("DELETE", base) == (200, {"session_id": sid, "closed": True})
        status, body = call("POST", f"{base}/reset", {})
        assert status == 404 and "was closed" in body["detail"]
        status, body = call("GET", f"{url}/sessions/nobody/state")
        assert status == 404 and "unknown session 'nobody'" in body["detail"]
        assert "POST /sessions" in body["detail"]
        # openenv's stateless routes would build sandboxes outside the limit: they are not served.
        assert call("POST", f"{url}/reset", {})[0] == 404 and call("POST", f"{url}/step", {})[0] == 404


def test_a_malformed_websocket_message_says_which_field(specs, recorder: Recorder) -> None:
    app = build_app(recorder, [s.task for s in specs.values()], domain="terminal", max_sessions=1)
    with serving(app) as url:
        with ws_connect(url.replace("http", "ws") + "/ws") as ws:
            ws.send("{oops")
            assert json.loads(ws.recv())["data"]["code"] == "INVALID_JSON"
            ws.send(json.dumps({"type": "step", "data": {"command": "ls"}}))
            error = json.loads(ws.recv())["data"]
        assert error["code"] == "VALIDATION_ERROR"
        assert "kind: Field required" in error["message"] and "command: Extra inputs" in error["message"]
        with GenericEnvClient(base_url=url).sync() as env:
            with pytest.raises(RuntimeError, match="kind: Field required"):
                env.step({"arguments": {}})


def test_one_limit_for_websocket_and_http_sessions(specs, recorder: Recorder) -> None:
    app = build_app(recorder, [s.task for s in specs.values()], domain="terminal", max_sessions=2)
    with serving(app) as url:
        first = call("POST", f"{url}/sessions")[1]["session_id"]
        with GenericEnvClient(base_url=url).sync() as held:
            assert held.state()["domain"] == "terminal"  # a WebSocket session: the second of two
            status, body = call("POST", f"{url}/sessions")
            assert status == 503 and body["max_sessions"] == 2
            assert "limit of 2 concurrent sessions" in body["detail"] and "--max-sessions" in body["detail"]
            with GenericEnvClient(base_url=url).sync() as refused:
                with pytest.raises(RuntimeError, match=r"limit of 2 concurrent sessions.*CAPACITY_REACHED"):
                    refused.state()
        assert call("DELETE", f"{url}/sessions/{first}")[0] == 200
        wait_for(lambda: pool_of(app).active_sessions == 0, 10, "both sessions to close")
        assert call("POST", f"{url}/sessions")[0] == 201
    assert app.state.stats.counts["refused"] == 2
    assert not recorder.made, "no session reset, so no sandbox was made"


def test_idle_sessions_are_reclaimed_busy_ones_are_not(specs, recorder: Recorder) -> None:
    app = build_app(
        recorder, [s.task for s in specs.values()], domain="terminal", max_sessions=3, idle_timeout_s=1.5
    )
    pool = pool_of(app)
    with serving(app) as url:
        sid = call("POST", f"{url}/sessions")[1]["session_id"]
        assert call("POST", f"{url}/sessions/{sid}/reset", {"task_id": TASK})[0] == 200
        # A step longer than the lease renews it at both ends: the session is busy, not idle.
        slow = {"action": {"kind": "command", "arguments": {"command": "sleep 2.5", "timeout": 10}}}
        assert call("POST", f"{url}/sessions/{sid}/step", slow)[0] == 200
        assert call("GET", f"{url}/sessions/{sid}/state")[1]["step_count"] == 1
        with GenericEnvClient(base_url=url).sync() as ws_env:
            ws_env.reset(task_id=TASK)
            assert recorder.held() and len(pool.session_resources()) == 2
            started = time.monotonic()
            wait_for(lambda: pool.active_sessions == 0, 15, "both idle sessions to be reclaimed")
            assert time.monotonic() - started < 6
            assert not recorder.leaked(), "a reclaimed session's sandbox is closed"
            status, body = call("POST", f"{url}/sessions/{sid}/step", {"action": {"kind": "done"}})
            assert status == 410 and body["lease_s"] == 1.5
            assert "expired" in body["detail"] and "past its lease of 1.5 s" in body["detail"]
            assert "reclaimed" in body["detail"] and "POST /sessions" in body["detail"]
            with pytest.raises(RuntimeError, match="expired.*lease of 1.5 s.*new WebSocket"):
                ws_env.step({"kind": "done"})
    assert app.state.stats.counts["expired"] == 2


def test_an_http_step_past_its_timeout_ends_the_episode_and_frees_the_sandbox(
    specs, recorder: Recorder
) -> None:
    app = build_app(recorder, [s.task for s in specs.values()], domain="terminal", max_sessions=1)
    with serving(app) as url:
        base = f"{url}/sessions/{call('POST', f'{url}/sessions')[1]['session_id']}"
        assert call("POST", f"{base}/reset", {"task_id": TASK})[0] == 200
        slow = {"kind": "command", "arguments": {"command": "sleep 30", "timeout": 60}}
        for bad in (0, -1, "soon", True):
            status, body = call("POST", f"{base}/step", {"action": slow, "timeout_s": bad})
            assert status == 422 and "timeout_s must be a positive number" in body["detail"]
        started = time.monotonic()
        status, body = call("POST", f"{base}/step", {"action": slow, "timeout_s": 0.5})
        assert time.monotonic() - started < 15, "the sandbox was closed, not waited for"
        assert status == 200 and body["done"] is True and body["reward"] is None
        assert "StepTimeoutError: the step took over 0.5 s" in body["observation"]["error"]
        assert not recorder.held(), "the timed-out step's sandbox was released"
        state = call("GET", f"{base}/state")[1]
        assert state["done"] and state["step_count"] == 0
        # The next episode gets a fresh sandbox.
        assert call("POST", f"{base}/reset", {"task_id": TASK})[0] == 200 and len(recorder.made) == 2

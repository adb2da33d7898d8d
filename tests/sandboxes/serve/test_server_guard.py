"""What reaches a served sandbox, against a real bwrap terminal behind the real server: a foreign Host
header (DNS rebinding) or a foreign Origin is refused on every route and on the WebSocket handshake, a
state-changing body must be JSON, and a 20 MB action is refused at once with the session still
answering afterwards, over HTTP and over the WebSocket."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from websockets.sync.client import connect as ws_connect

from sandboxes.serve.auth import DEFAULT_MAX_ACTION_BYTES, HostPolicy
from sandboxes.serve.server import build_app, real_sandbox_factory
from sandboxes.tasks import embedded_tasks
from tests.sandboxes.serve.conftest import Recorder, call, serving

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]
TASK = "files-create-notes"
BIG = 20 * 1024 * 1024


@pytest.fixture
def served(need_tools) -> Iterator[tuple[str, Recorder]]:
    need_tools("bwrap", "tmux")
    recorder = Recorder(real_sandbox_factory("terminal", "bwrap"))
    app = build_app(recorder, [s.task for s in embedded_tasks("terminal")], domain="terminal", max_sessions=2)
    with serving(app) as url:
        yield url, recorder
    assert not recorder.leaked(), f"sandbox resources survived: {recorder.leaked()}"


def raw(
    url: str, method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes | None = None
) -> tuple[int, dict]:
    """One request with exactly these headers (Host included, when given): http.client, no proxy."""
    parsed = urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    try:
        headers = dict(headers or {})
        conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        response = conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else {}
    finally:
        conn.close()


def handshake(url: str, host: str, origin: str | None = None) -> int:
    """The HTTP status a WebSocket handshake on /ws gets with these Host and Origin headers."""
    parsed = urlparse(url)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        "GET /ws HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
    ]
    if origin is not None:
        lines.append(f"Origin: {origin}")
    with socket.create_connection((parsed.hostname, parsed.port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        status_line = sock.makefile("rb").readline().decode()
    return int(status_line.split()[1])


def step(url: str, session: str, command: str) -> tuple[int, dict]:
    body = {"action": {"kind": "command", "arguments": {"command": command}}}
    return call("POST", f"{url}/sessions/{session}/step", body)


def test_foreign_host_headers_are_refused_everywhere(served) -> None:
    url, recorder = served
    port = urlparse(url).port
    for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.nip.io:{port}", "10.0.0.1"):
        status, body = raw(url, "GET", "/health", headers={"Host": host})
        assert status == 421 and "DNS rebinding" in body["detail"] and "--allow-host" in body["detail"]
        assert raw(url, "POST", "/sessions", headers={"Host": host})[0] == 421
        assert handshake(url, host) == 421
    assert recorder.made == [], "a refused request made a sandbox"
    # This server's own names pass.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST."):
        assert raw(url, "GET", "/health", headers={"Host": host}) == (200, {"status": "healthy"})
    assert handshake(url, f"127.0.0.1:{port}") == 101


def test_foreign_origins_are_refused_and_bodies_must_be_json(served) -> None:
    url, recorder = served
    port = urlparse(url).port
    evil = "http://attacker.example:8080"
    for path in ("/health", "/schema"):
        status, body = raw(url, "GET", path, headers={"Origin": evil})
        assert status == 403 and "--allow-origin http://attacker.example:8080" in body["detail"]
    assert raw(url, "GET", "/health", headers={"Origin": "null"})[0] == 403
    assert raw(url, "POST", "/sessions", headers={"Origin": evil})[0] == 403
    assert handshake(url, f"127.0.0.1:{port}", origin=evil) == 403
    assert handshake(url, f"127.0.0.1:{port}", origin=f"http://localhost:{port + 1}") == 403
    # The server's own pages (same origin) may.
    assert raw(url, "GET", "/health", headers={"Origin": f"http://127.0.0.1:{port}"})[0] == 200
    assert recorder.made == []

    status, opened = call("POST", f"{url}/sessions")
    session = opened["session_id"]
    assert call("POST", f"{url}/sessions/{session}/reset", {"task_id": TASK})[0] == 200
    # A text/plain POST (a "simple" cross-origin request: no preflight) never reaches the sandbox.
    text = json.dumps({"action": {"kind": "command", "arguments": {"command": "touch pwned"}}}).encode()
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        status, body = raw(
            url, "POST", f"/sessions/{session}/step", headers={"Content-Type": content_type}, body=text
        )
        assert status == 415 and "application/json" in body["detail"], (content_type, body)
    assert call("GET", f"{url}/sessions/{session}/state")[1]["step_count"] == 0
    status, seen = step(url, session, "ls pwned; echo checked")
    assert status == 200 and "No such file" in seen["observation"]["text"]
    assert call("DELETE", f"{url}/sessions/{session}")[0] == 200


def test_a_20_mb_action_is_refused_at_once_and_the_session_goes_on(served) -> None:
    url, _ = served
    status, opened = call("POST", f"{url}/sessions")
    session = opened["session_id"]
    assert call("POST", f"{url}/sessions/{session}/reset", {"task_id": TASK})[0] == 200

    huge = json.dumps({"action": {"kind": "command", "arguments": {"command": "echo " + "x" * BIG}}})
    started = time.monotonic()
    status, body = raw(
        url,
        "POST",
        f"/sessions/{session}/step",
        headers={"Content-Type": "application/json"},
        body=huge.encode(),
    )
    took = time.monotonic() - started
    assert status == 413, body
    assert f"limit of {DEFAULT_MAX_ACTION_BYTES} bytes (--max-action-bytes)" in body["detail"]
    assert took < 5, f"the refusal took {took:.1f} s"
    # Chunked (no length up front): counted as it arrives, refused the same way.
    parsed = urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    chunks = (huge[i : i + 65536].encode() for i in range(0, 4 * 65536, 65536))
    conn.request(
        "POST",
        f"/sessions/{session}/step",
        body=chunks,
        headers={"Content-Type": "application/json"},
        encode_chunked=True,
    )
    response = conn.getresponse()
    assert response.status == 413 and b"--max-action-bytes" in response.read()
    conn.close()
    # An action just under the limit runs, and quickly (tmux types all of it).
    started = time.monotonic()
    status, seen = step(url, session, "echo " + "z" * (DEFAULT_MAX_ACTION_BYTES - 300) + " | wc -c")
    assert status == 200 and str(DEFAULT_MAX_ACTION_BYTES - 299) in seen["observation"]["text"]
    assert time.monotonic() - started < 10
    # The session still answers, at once: three echoes, as in the report.
    for n in range(3):
        started = time.monotonic()
        status, seen = step(url, session, f"echo still-here-{n}")
        assert status == 200 and f"still-here-{n}" in seen["observation"]["text"]
        assert time.monotonic() - started < 10
    assert call("GET", f"{url}/sessions/{session}/state")[1]["step_count"] == 4
    assert call("DELETE", f"{url}/sessions/{session}")[0] == 200


def test_a_too_large_websocket_message_gets_an_error_and_the_session_goes_on(served) -> None:
    url, _ = served
    with ws_connect(url.replace("http", "ws") + "/ws", proxy=None, max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK}}))
        assert json.loads(ws.recv(timeout=60))["type"] == "observation"
        big = {"kind": "command", "arguments": {"command": "echo " + "y" * (DEFAULT_MAX_ACTION_BYTES * 4)}}
        started = time.monotonic()
        ws.send(json.dumps({"type": "step", "data": big}))
        refused = json.loads(ws.recv(timeout=30))
        assert refused["type"] == "error" and refused["data"]["code"] == "MESSAGE_TOO_LARGE"
        assert f"limit of {DEFAULT_MAX_ACTION_BYTES} bytes (--max-action-bytes)" in refused["data"]["message"]
        assert time.monotonic() - started < 5
        ws.send(
            json.dumps({"type": "step", "data": {"kind": "command", "arguments": {"command": "echo ok"}}})
        )
        answer = json.loads(ws.recv(timeout=60))
        assert answer["type"] == "observation" and "ok" in answer["data"]["observation"]["text"]


def test_the_host_policy_follows_the_bind() -> None:
    loopback = HostPolicy.for_bind("127.0.0.1")
    assert loopback.host_allowed("127.0.0.1:8000") and loopback.host_allowed("[::1]:8000")
    assert loopback.host_allowed("localhost") and not loopback.host_allowed("10.1.2.3:8000")
    assert not loopback.host_allowed("evil.example:8000") and not loopback.host_allowed(socket.gethostname())
    wide = HostPolicy.for_bind("0.0.0.0", allow_hosts=["*.corp.example", "proxy.example"])
    assert wide.host_allowed("10.1.2.3:8000") and wide.host_allowed(socket.gethostname())
    assert wide.host_allowed("a.corp.example") and wide.host_allowed("proxy.example:443")
    assert not wide.host_allowed("corp.example.evil.example") and not wide.host_allowed("evil.example")
    assert HostPolicy.for_bind("127.0.0.1", allow_hosts=["*"]).host_allowed("anything.example")
    assert loopback.origin_allowed("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert not loopback.origin_allowed("http://127.0.0.1:8001", "127.0.0.1:8000")
    allowed = HostPolicy.for_bind("127.0.0.1", allow_origins=["http://app.example:3000/"])
    assert allowed.origin_allowed("http://app.example:3000", "127.0.0.1:8000")

"""The guard with streams and sockets: allowed origins stream as sent, WebSockets and redirect hops
elsewhere are refused and recorded, and blocked frames and navigations say what and why."""

from __future__ import annotations

import re
import socket
import urllib.parse

import pytest

from sandboxes.web import WebSandbox, default_allowed_origins
from tests.sandboxes.web.conftest import act, bid_of, task
from tests.sandboxes.web.live_server import STREAM_GAP_S, STREAMS_PAGE, live_server

pytestmark = pytest.mark.chromium

_ARRIVAL = re.compile(r"StaticText '(sse|ws): (\w+ \d) at (\d+)'")


def arrivals(text: str) -> dict[str, list[tuple[str, int]]]:
    """{"sse": [(message, ms since the page started)], "ws": [...]} as the page listed them."""
    found: dict[str, list[tuple[str, int]]] = {"sse": [], "ws": []}
    for kind, message, at in _ARRIVAL.findall(text):
        found[kind].append((message, int(at)))
    return found


def test_sse_and_websocket_on_an_allowed_origin_arrive_as_sent(sandbox: WebSandbox) -> None:
    with live_server({"/streams": STREAMS_PAGE}) as server:
        allowed = [*default_allowed_origins(), server.origin]
        sandbox.reset(task(server.url("/streams"), allowed=allowed))
        obs = sandbox.step(act("noop", wait_ms=2500)).observation
    got = arrivals(obs.text)
    assert [m for m, _ in got["sse"]] == [f"event {n}" for n in range(1, 6)], obs.text
    assert [m for m, _ in got["ws"]] == [f"socket {n}" for n in range(1, 4)], obs.text
    # Streamed, not buffered: each message arrived about when it was sent, STREAM_GAP_S apart.
    for kind in ("sse", "ws"):
        times = [at for _, at in got[kind]]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert min(gaps) >= STREAM_GAP_S * 1000 * 0.5, (kind, times)
    assert obs.data["blocked"] == [] and "ws: error" not in obs.text


def test_a_websocket_to_a_forbidden_origin_is_blocked_and_recorded(sandbox: WebSandbox) -> None:
    with live_server({"/streams": STREAMS_PAGE}) as page_server, live_server() as elsewhere:
        target = elsewhere.url("/ws").replace("http://", "ws://")
        allowed = [*default_allowed_origins(), page_server.origin]
        obs = sandbox.reset(
            task(page_server.url(f"/streams?ws={urllib.parse.quote(target)}"), allowed=allowed)
        )
        step = sandbox.step(act("noop", wait_ms=300))
        assert elsewhere.hits == []  # no connection reached the other origin
    records = obs.data["blocked"] + step.info["blocked"]
    expected = {
        "url": target,
        "kind": "websocket",
        "reason": f"origin {elsewhere.origin!r} is not allowed in this task",
    }
    assert expected in records, records
    assert f"Blocked: websocket to {target}" in obs.text + step.observation.text
    assert "ws: error" in step.observation.text  # the page saw its socket fail


def test_a_redirect_hop_to_a_forbidden_origin_is_recorded(sandbox: WebSandbox) -> None:
    with live_server() as elsewhere:
        hop = f"/hop?to={urllib.parse.quote(elsewhere.url('/tracked'))}"
        pages = {"/": f'<!DOCTYPE html><title>Start</title><a href="{hop}">Go</a>'}
        with live_server(pages) as server:
            obs = sandbox.reset(task(server.url("/"), allowed=[server.origin]))
            step = sandbox.step(act("click", bid=bid_of(obs, "Go")))
        assert elsewhere.hits == []
    (record,) = [r for r in step.info["blocked"] if r["url"] == elsewhere.url("/tracked")]
    assert record["kind"] == "navigation"
    assert record["reason"].startswith(f"redirected from {server.url(hop)}; origin")
    assert step.observation.data["last_action_error"].startswith(
        f"navigation to {elsewhere.url('/tracked')!r} blocked: redirected from"
    )


def test_a_blocked_frame_shows_what_was_blocked_and_why(sandbox: WebSandbox) -> None:
    with live_server() as elsewhere:
        frame_url = elsewhere.url("/widget")
        pages = {"/": f'<!DOCTYPE html><title>Framed</title><h1>Host</h1><iframe src="{frame_url}"></iframe>'}
        with live_server(pages) as server:
            obs = sandbox.reset(task(server.url("/"), allowed=[server.origin]))
        assert elsewhere.hits == []
    reason = f"origin {elsewhere.origin!r} is not allowed in this task"
    assert {"url": frame_url, "kind": "frame", "reason": reason} in obs.data["blocked"]
    assert f"Blocked: frame to {frame_url} ({reason})" in obs.text


def test_meta_refresh_away_and_a_file_link_say_so(sandbox: WebSandbox) -> None:
    pages = {
        "/refresh": '<!DOCTYPE html><title>Moving</title><meta http-equiv="refresh" content="0;url=http://example.com/">',
        "/file": '<!DOCTYPE html><title>Local</title><a href="file:///etc/passwd">Local file</a>',
    }
    with live_server(pages) as server:
        obs = sandbox.reset(task(server.url("/refresh"), allowed=[server.origin]))
        reason = "origin 'http://example.com' is not allowed in this task"
        assert {"url": "http://example.com/", "kind": "navigation", "reason": reason} in obs.data["blocked"]
        assert f"Blocked: navigation to http://example.com/ ({reason})" in obs.text
        obs = sandbox.reset(task(server.url("/file"), allowed=[server.origin]))
        step = sandbox.step(act("click", bid=bid_of(obs, "Local file")))
    expected = "file:// URLs cannot be opened from a web page"
    assert step.info["blocked"] == [{"url": "file:///etc/passwd", "kind": "navigation", "reason": expected}]
    assert (
        step.observation.data["last_action_error"]
        == f"navigation to 'file:///etc/passwd' blocked: {expected}"
    )
    assert "root:" not in step.observation.text


def test_webrtc_sends_no_udp_past_the_guard(sandbox: WebSandbox) -> None:
    """A page's RTCPeerConnection asks a STUN server on a port no task allows: ICE gathering would
    send a UDP binding request around any proxy unless WebRTC is kept to proxied TCP."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stun:
        stun.bind(("127.0.0.1", 0))
        stun.settimeout(3.0)
        stun_url = f"stun:127.0.0.1:{stun.getsockname()[1]}"
        page = (
            "<!DOCTYPE html><title>rtc</title><script>"
            f"const pc = new RTCPeerConnection({{iceServers: [{{urls: '{stun_url}'}}]}});"
            "pc.createDataChannel('x'); pc.createOffer().then(o => pc.setLocalDescription(o));"
            "</script>"
        )
        with live_server({"/rtc": page}) as server:
            sandbox.reset(task(server.url("/rtc"), allowed=[server.origin]))
            with pytest.raises(TimeoutError):
                stun.recvfrom(2048)

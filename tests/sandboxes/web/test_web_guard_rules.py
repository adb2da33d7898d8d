"""The guard's pure parts: the proxy-bypass rules, the refusal reasons, and the refusing proxy
itself over a real socket."""

from __future__ import annotations

import socket

from sandboxes.web.guard import OriginGuard, as_http, bypass_rules, refusal_reason
from sandboxes.web.proxy import RefusingProxy

ALLOWED = {"http://shop.agentworld.test", "http://127.0.0.1:8123", "https://example.com"}


def test_bypass_rules_name_the_port_and_the_websocket_scheme() -> None:
    assert bypass_rules("http://shop.agentworld.test") == [
        "http://shop.agentworld.test:80",
        "ws://shop.agentworld.test:80",
    ]
    assert bypass_rules("https://example.com") == ["https://example.com:443", "wss://example.com:443"]
    proxy = RefusingProxy()
    try:
        settings = OriginGuard(ALLOWED, proxy).proxy_settings()
    finally:
        proxy.close()
    assert settings is not None and settings["bypass"].startswith("<-loopback>,")  # first rule decides


def test_refusal_reasons() -> None:
    assert refusal_reason("ws://127.0.0.1:8123/socket", ALLOWED) == ""
    assert as_http("wss://example.com/x") == "https://example.com/x"
    assert (
        refusal_reason("ws://127.0.0.1:9/", ALLOWED)
        == "origin 'http://127.0.0.1:9' is not allowed in this task"
    )
    assert "only http and https URLs are allowed" in refusal_reason("ftp://example.com/", ALLOWED)


def test_the_proxy_refuses_tunnels_and_leaves_plain_requests_unanswered() -> None:
    proxy = RefusingProxy()
    port = int(proxy.server.rsplit(":", 1)[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
            assert conn.recv(100).startswith(b"HTTP/1.1 403 Forbidden")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"GET http://example.com/x HTTP/1.1\r\n\r\n")
            assert conn.recv(100) == b""  # closed without an answer: a network error for the page
    finally:
        proxy.close()

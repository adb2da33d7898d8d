"""Who may talk to a served sandbox: loopback by default, a bearer token beyond it.

A sandbox runs whatever its client sends (shell commands, in the terminal's case), so a server
reachable from other machines must not be open to them. `check_bind` refuses a non-loopback address
without a token; `BearerAuth` then asks every HTTP request and every WebSocket handshake for
`Authorization: Bearer <token>`, compared in constant time. `/health` stays open for probes.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

TOKEN_ENV = "AGENTWORLD_SERVE_TOKEN"
OPEN_PATHS = frozenset({"/health"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class TokenRequiredError(ValueError):
    """A non-loopback bind without a token."""


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine. A host name other than
    `localhost` may resolve anywhere, so it counts as reachable from outside."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_token(token: str | None) -> str | None:
    """The token given, else $AGENTWORLD_SERVE_TOKEN, else None. An empty token is no token."""
    chosen = token if token is not None else os.environ.get(TOKEN_ENV)
    return chosen or None


def check_bind(host: str, token: str | None) -> None:
    """Raise TokenRequiredError when `host` is reachable from other machines and no token is set."""
    if token is None and not is_loopback(host):
        raise TokenRequiredError(
            f"refusing to listen on {host} without a token: clients there could run anything in the "
            f"sandboxes. Set one in the environment ({TOKEN_ENV}=$(openssl rand -hex 32)) or pass "
            "--token TOKEN (visible in the process list), and give it to clients as "
            "`Authorization: Bearer TOKEN` (sandboxes.serve.client.connect(url, token=...)); "
            "or listen on 127.0.0.1"
        )


class BearerAuth:
    """ASGI middleware: 401 for an HTTP request or WebSocket handshake without the bearer token."""

    def __init__(self, app: ASGIApp, token: str, open_paths: frozenset[str] = OPEN_PATHS) -> None:
        if not token:
            raise ValueError("BearerAuth needs a non-empty token")
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._open_paths = open_paths

    def authorized(self, scope: Scope) -> bool:
        given = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                given = value
                break
        return hmac.compare_digest(given, self._expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] not in ("http", "websocket")
            or scope["path"] in self._open_paths
            or self.authorized(scope)
        ):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "detail": "missing or wrong bearer token: send the header `Authorization: Bearer <token>` "
                "(the token the server was started with)"
            }
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await receive()  # the handshake's websocket.connect
        if "websocket.http.response" in scope.get("extensions", {}):
            # The WebSocket denial extension: a real HTTP 401 instead of the 403 a bare close gives.
            await send({"type": "websocket.http.response.start", "status": 401, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})

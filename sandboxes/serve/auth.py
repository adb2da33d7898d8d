"""Who may talk to a served sandbox, and how much they may send.

A sandbox runs whatever its client sends (shell commands, in the terminal's case), and a browser on
the same machine is an attacker's foothold: any page it opens can aim requests at 127.0.0.1. So:

- A bearer token, even on loopback: the CLI generates one unless it is given one (`--token`,
  $AGENTWORLD_SERVE_TOKEN) or told `--no-token`, and writes it to `token_path(port)` (mode 0600),
  where `sandboxes.serve.client.connect` finds it. `/health` stays open for probes.
- `Host` must name this server: a page on attacker.example whose name was rebound to 127.0.0.1 (DNS
  rebinding) still sends `Host: attacker.example`. An `Origin`, which browsers send on every
  WebSocket handshake and cross-origin POST, must be the server's own or allowed (`--allow-origin`).
- A request body must be `application/json`: a `text/plain` POST is a "simple" request that a page
  sends cross-origin without a CORS preflight.
- A request body is at most `max_body_bytes` (413 names the limit); `connection.ConnectionTracker` bounds
  WebSocket messages the same way.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from fastapi import HTTPException

TOKEN_ENV = "AGENTWORLD_SERVE_TOKEN"
OPEN_PATHS = frozenset({"/health"})
TOKEN_DIR = "~/.cache/agentworld/serve"  # <port>.token: a generated token, for clients on this machine
DEFAULT_MAX_ACTION_BYTES = 64 * 1024
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

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
            f"sandboxes. Drop --no-token (a token is then generated), set one in the environment "
            f"({TOKEN_ENV}=$(openssl rand -hex 32)) or pass --token TOKEN (visible in the process "
            "list), and give it to clients as `Authorization: Bearer TOKEN` "
            "(sandboxes.serve.client.connect(url, token=...)); or listen on 127.0.0.1"
        )


# -- generated tokens ------------------------------------------------------------------------------


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_path(port: int) -> Path:
    """Where the server on `port` keeps the token it generated (one file per port: servers side by
    side each have their own)."""
    return Path(os.path.expanduser(TOKEN_DIR)) / f"{port}.token"


def write_token_file(path: Path, token: str) -> None:
    """Write `token` readable by this user only: the directory 0700, the file 0600 from its creation
    on (never world-readable, even for an instant), and not through a symlink planted there."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)  # a file left by an earlier run keeps its old mode through O_CREAT
        f.write(token + "\n")


def remove_token_file(path: Path, token: str) -> None:
    """Remove the file if it still holds `token` (a later server on the same port may own it now)."""
    try:
        if path.read_text().strip() == token:
            path.unlink()
    except OSError:
        pass


def stored_token(url: str) -> str | None:
    """The token a server on this machine generated for the port of `url` (a loopback URL only: a
    token is never sent to a host it was not made for); None when there is none."""
    parsed = urlparse(url)
    if not parsed.hostname or not is_loopback(parsed.hostname) or parsed.port is None:
        return None
    try:
        return token_path(parsed.port).read_text().strip() or None
    except OSError:
        return None


# -- Host and Origin -------------------------------------------------------------------------------


def _host_name(header: str) -> str:
    """The name in a Host header ("[::1]:8000" -> "::1"), lower case, without a trailing dot."""
    if header.startswith("["):
        name = header[1 : header.find("]")] if "]" in header else header
    else:
        name = header.rsplit(":", 1)[0] if header.count(":") == 1 else header
    return name.strip().rstrip(".").lower()


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclass(frozen=True)
class HostPolicy:
    """Which Host names and Origins a server answers. A DNS-rebinding page can only send a name it
    controls, never an IP address literal; so IP literals are safe wherever the bind can receive them,
    and a name must be this server's (or allowed)."""

    names: frozenset[str]  # exact host names, "*.suffix" patterns, or "*": any
    any_ip: bool  # every IP literal (a wildcard or non-loopback bind); else loopback ones only
    origins: frozenset[str]  # "scheme://host[:port]" exactly, or "*"

    @classmethod
    def for_bind(
        cls, host: str, allow_hosts: Iterable[str] = (), allow_origins: Iterable[str] = ()
    ) -> HostPolicy:
        names = {"localhost", *(_host_name(h) for h in allow_hosts)}
        loopback = is_loopback(host)
        if not loopback:
            # Reachable from other machines, which may name it by this machine's names.
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        if _ip(host.strip("[]")) is None:
            names.add(_host_name(host))
        return cls(frozenset(names), not loopback, frozenset(o.rstrip("/").lower() for o in allow_origins))

    def host_allowed(self, header: str) -> bool:
        name = _host_name(header)
        ip = _ip(name)
        if ip is not None:
            return self.any_ip or ip.is_loopback
        if "*" in self.names or name in self.names:
            return True
        return any(p.startswith("*.") and name.endswith(p[1:]) for p in self.names)

    def origin_allowed(self, origin: str, host: str) -> bool:
        """`origin` is the server's own (a page it served: same scheme-less host and port as the
        request's Host) or one allowed; "null" (a sandboxed frame, a file) never is."""
        origin = origin.rstrip("/").lower()
        if "*" in self.origins or origin in self.origins:
            return True
        host = host.lower()
        return origin in (f"http://{host}", f"https://{host}")


# -- the middleware --------------------------------------------------------------------------------


class Guard:
    """ASGI middleware, outermost: refuses an HTTP request or WebSocket handshake whose Host is not
    this server's (421), whose Origin is foreign (403), without the bearer token (401, when there is
    one), and a request body that is not JSON (415) or is over `max_body_bytes` (413). One pass over
    the headers, before anything else runs; a WebSocket's messages cost nothing here."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        policy: HostPolicy,
        token: str | None = None,
        max_body_bytes: int = DEFAULT_MAX_ACTION_BYTES,
        open_paths: frozenset[str] = OPEN_PATHS,
    ) -> None:
        if token is not None and not token:
            raise ValueError("Guard needs a non-empty token, or None for none")
        self.app = app
        self.policy = policy
        self._expected = f"Bearer {token}".encode() if token else None
        self.max_body_bytes = max_body_bytes
        self._open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        host = origin = authorization = content_type = length = None
        chunked = False
        for name, value in scope["headers"]:  # ASGI header names are lower case
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"authorization":
                authorization = value
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
        # A request without Host (HTTP/1.0) cannot come from a browser: nothing to rebind.
        if host is not None and not self.policy.host_allowed(host):
            detail = (
                f"this server does not answer to Host {host!r} (a guard against DNS rebinding): use its "
                "address (e.g. http://127.0.0.1:PORT), or start it with --allow-host "
                f"{_host_name(host)} if that name is meant to reach it"
            )
            await _refuse(scope, receive, send, 421, detail)
            return
        if origin is not None and not self.policy.origin_allowed(origin, host or ""):
            detail = (
                f"cross-origin request from {origin!r} refused: a web page may not drive this server's "
                f"sandboxes; start the server with --allow-origin {origin} to allow that page"
            )
            await _refuse(scope, receive, send, 403, detail)
            return
        if (
            self._expected is not None
            and scope["path"] not in self._open_paths
            and not hmac.compare_digest(authorization or b"", self._expected)
        ):
            detail = (
                "missing or wrong bearer token: send the header `Authorization: Bearer <token>` (the token "
                f"the server printed at start and wrote to {TOKEN_DIR}/<port>.token, or the one it was given)"
            )
            await _refuse(scope, receive, send, 401, detail, [(b"www-authenticate", b"Bearer")])
            return
        if kind == "http" and scope["method"] in _BODY_METHODS and (chunked or length not in (None, b"0")):
            media = (content_type or b"").split(b";", 1)[0].strip().lower()
            if media != b"application/json":
                shown = content_type.decode("latin-1") if content_type else "none"
                detail = f"a request body must be JSON (Content-Type: application/json), not {shown}"
                await _refuse(scope, receive, send, 415, detail)
                return
            if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
                await _refuse(scope, receive, send, 413, self.too_large(int(length)))
                return
            if chunked:  # no length up front: count as it arrives
                receive = self._bounded(receive)
        await self.app(scope, receive, send)

    def too_large(self, size: int | None) -> str:
        got = f"{size} bytes" if size is not None else "longer than that"
        return (
            f"the request body is {got}, over this server's limit of {self.max_body_bytes} bytes "
            "(--max-action-bytes): send a smaller action, or restart the server with a larger limit"
        )

    def _bounded(self, receive: Receive) -> Receive:
        seen = 0

        async def bounded() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:
                # Reading the body raises this inside the route; starlette answers it as a 413.
                raise HTTPException(413, self.too_large(None))
            return message

        return bounded


async def _refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    detail: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += extra or []
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await receive()  # the handshake's websocket.connect
    if "websocket.http.response" in scope.get("extensions", {}):
        # The WebSocket denial extension: a real HTTP status instead of the 403 a bare close gives.
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008})

"""A client of `python -m sandboxes.serve`: openenv-core's own GenericEnvClient, plus the bearer token.

openenv's client opens its WebSocket without a way to add headers, so a server started with a token
(every server, unless started with --no-token) would refuse it; `SandboxClient` only changes how the
connection is opened. The token is the one given, else $AGENTWORLD_SERVE_TOKEN, else, for a server on
this machine, the one it generated (`auth.token_path(port)`). Everything else (the
messages, `.sync()`, TRL's use of it) is openenv's::

    from sandboxes.serve.client import connect

    with connect("http://127.0.0.1:8000", token="...").sync() as env:
        first = env.reset(task_id="files-create-notes")
        result = env.step({"kind": "command", "arguments": {"command": "ls"}})
        last = env.step({"kind": "done"})  # last.reward: the task verifier's
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from openenv.core.generic_client import GenericEnvClient
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from sandboxes.serve.auth import TOKEN_DIR, TOKEN_ENV, resolve_token, stored_token

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class SandboxClient(GenericEnvClient):
    """GenericEnvClient that sends `Authorization: Bearer <token>` on the WebSocket handshake."""

    def __init__(self, base_url: str, *, token: str | None = None, **options: Any) -> None:
        super().__init__(base_url, **options)
        self._token = token

    async def connect(self) -> SandboxClient:
        if self._ws is not None:
            return self
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else None
        # A loopback server is never reached through a proxy (openenv's client does the same).
        loopback = urlparse(self._ws_url).hostname in _LOOPBACK_NAMES
        try:
            self._ws = await ws_connect(
                self._ws_url,
                open_timeout=self._connect_timeout,
                max_size=self._max_message_size,
                additional_headers=headers,
                proxy=None if loopback else True,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            hint = ""
            if status == 401:
                hint = (
                    f" (the server wants a bearer token: connect(url, token=...) or set {TOKEN_ENV}; "
                    f"a server on this machine prints it at start and keeps it in {TOKEN_DIR}/PORT.token)"
                    if not self._token
                    else " (the server refused this token)"
                )
            elif status in (403, 421):
                hint = " (the server refused this Host or Origin: see --allow-host and --allow-origin)"
            raise ConnectionError(f"{self._ws_url} refused the WebSocket: HTTP {status}{hint}") from exc
        except Exception as exc:
            raise ConnectionError(f"Failed to connect to {self._ws_url}: {exc}") from exc
        return self


def connect(base_url: str, token: str | None = None, **options: Any) -> SandboxClient:
    """A client of the server at `base_url` (http:// or ws://), not yet connected: use it as
    `async with connect(url) as env` or `with connect(url).sync() as env`. `token` defaults to
    $AGENTWORLD_SERVE_TOKEN, then to the token a server on this machine generated for that port;
    options go to openenv's EnvClient (message_timeout_s, ...)."""
    return SandboxClient(base_url, token=resolve_token(token) or stored_token(base_url), **options)

"""The origin guard: a browser context reaches only its task's allowed origins (http/https, and
WebSockets to the same hosts and ports), and every request it refuses is recorded.

The guard sits in the browser's network stack, outside the page's reach: each context's proxy
settings let the allowed origins go straight to their servers and send every other origin to a
proxy that refuses it (sandboxes.web.proxy). So every request Chromium makes is covered, redirect
hops, WebSockets and workers' requests included, and allowed responses stream as they arrive.
Playwright's request routing is not used: it would pause every request for a round trip to its
driver and turn off the HTTP cache.

Each refusal becomes a record {url, kind, reason} from Playwright's events: a request to an origin
that is not allowed, a page's WebSocket, Chromium's console line for a file:// link. The sandbox
puts a step's records in its `info`, and blocked navigations and frames in the observation.
"""

from __future__ import annotations

import re
import urllib.parse

from playwright.sync_api import ConsoleMessage, Request, WebSocket

from sandboxes.web.config import origin_of
from sandboxes.web.execute import ActionFailed, check_url
from sandboxes.web.proxy import RefusingProxy
from sandboxes.web.settle import frame_of_navigation

# A WebSocket may reach the hosts and ports its http(s) equivalent may (a bypass rule each).
WEBSOCKET_SCHEMES = {"ws": "http", "wss": "https"}
DEFAULT_PORTS = {"http": 80, "https": 443}
NETWORK_SCHEMES = ("http", "https", "ws", "wss")
_LOCAL_RESOURCE = re.compile(r"Not allowed to load local resource: (\S+)")


def as_http(url: str) -> str:
    """ws://host/x -> http://host/x (and wss -> https); other URLs unchanged."""
    scheme, sep, rest = url.partition("://")
    return f"{WEBSOCKET_SCHEMES.get(scheme.lower(), scheme)}{sep}{rest}" if sep else url


def bypass_rules(origin: str) -> list[str]:
    """An allowed origin as Chromium proxy-bypass rules, for its own scheme and the WebSocket one,
    the port explicit: without a port a rule would match every port of the host."""
    parts = urllib.parse.urlsplit(origin)
    port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    socket_scheme = {"http": "ws", "https": "wss"}.get(parts.scheme)
    schemes = [parts.scheme, socket_scheme] if socket_scheme else [parts.scheme]
    return [f"{scheme}://{host}:{port}" for scheme in schemes]


def refusal_reason(url: str, allowed: set[str]) -> str:
    """Why `url` is refused ("" when it is allowed), in the words the agent sees."""
    try:
        check_url(as_http(url), allowed)
    except ActionFailed as exc:
        return str(exc).split(": ", 1)[1]
    return ""


class OriginGuard:
    def __init__(self, allowed_origins: set[str], proxy: RefusingProxy | None) -> None:
        self.allowed = allowed_origins
        self.proxy = proxy
        self._records: list[dict] = []

    # -- what the context is given -------------------------------------------------------------

    def proxy_settings(self) -> dict[str, str] | None:
        if self.proxy is None:
            return None
        rules = [
            rule for origin in sorted(self.allowed) if origin_of(origin) for rule in bypass_rules(origin)
        ]
        # "<-loopback>": Chromium would otherwise send loopback addresses around any proxy. It must
        # come first: Chromium takes the first rule that decides.
        return {"server": self.proxy.server, "bypass": ",".join(["<-loopback>", *rules])}

    # -- refusals ------------------------------------------------------------------------------

    def _record(self, url: str, kind: str, reason: str) -> None:
        record = {"url": url, "kind": kind, "reason": reason}
        if record not in self._records:
            self._records.append(record)

    def on_websocket(self, websocket: WebSocket) -> None:
        """A page opened a WebSocket: one to an origin that is not allowed is refused by the proxy."""
        reason = refusal_reason(websocket.url, self.allowed)
        if reason:
            self._record(websocket.url, "websocket", reason)

    def on_request(self, request: Request) -> None:
        """A request to an origin that is not allowed: the proxy refuses it (it never reaches the
        origin), and it is recorded as the browser asked for it. data:, blob: and the like never
        reach the network, so they are nobody's to refuse."""
        if urllib.parse.urlsplit(request.url).scheme not in NETWORK_SCHEMES:
            return
        reason = refusal_reason(request.url, self.allowed)
        if not reason:
            return
        if request.redirected_from is not None:
            reason = f"redirected from {request.redirected_from.url}; {reason}"
        self._record(request.url, request_kind(request), reason)

    def on_console(self, message: ConsoleMessage) -> None:
        """Chromium refuses links to file:// from a web page with nothing but a console line."""
        found = _LOCAL_RESOURCE.search(message.text)
        if found:
            self._record(found.group(1), "navigation", "file:// URLs cannot be opened from a web page")

    def drain(self) -> list[dict]:
        """The refusals recorded since the last call."""
        records, self._records = self._records, []
        return records


def request_kind(request: Request) -> str:
    frame = frame_of_navigation(request)
    if frame:
        return "frame" if frame == "frame" else "navigation"
    return request.resource_type

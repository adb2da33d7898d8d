"""The origin guard: a browser context reaches only its task's allowed origins (http/https, and
WebSockets to the same hosts and ports), and every request it refuses is recorded.

Two layers, both outside the page's reach:
- Playwright's routing, for the URLs of origins that are not allowed (a regular expression matched
  in Playwright's driver, so allowed requests never make a round trip to Python and stream as
  they arrive). It aborts them before any connection is made; a frame gets a page that says what
  was blocked and why, instead of Chromium's anonymous error page.
- The context's proxy (sandboxes.web.proxy): allowed origins bypass it, everything else goes to a
  proxy that refuses it. That covers what routing does not see: redirect hops, WebSockets, workers.

Each refusal becomes a record {url, kind, reason}; the sandbox puts a step's records in its `info`
and in the observation.
"""

from __future__ import annotations

import html
import re
import threading
import urllib.parse

from playwright.sync_api import ConsoleMessage, Request, Route, WebSocket

from sandboxes.web.config import origin_of
from sandboxes.web.execute import ActionFailed, check_url
from sandboxes.web.proxy import RefusingProxy
from sandboxes.web.settle import frame_of_navigation

# Chromium's WebSockets take their proxy (and so their bypass rule) from the http(s) equivalent.
WEBSOCKET_SCHEMES = {"ws": "http", "wss": "https"}
DEFAULT_PORTS = {"http": 80, "https": 443}
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


def blocked_page(url: str, reason: str) -> str:
    """What a blocked frame shows in place of its document."""
    text = html.escape(f"Blocked by the sandbox: {url} ({reason})")
    return f"<!DOCTYPE html><title>Blocked</title><p>{text}</p>"


class OriginGuard:
    def __init__(self, allowed_origins: set[str], proxy: RefusingProxy | None) -> None:
        self.allowed = allowed_origins
        self.proxy = proxy
        self._records: list[dict] = []
        self._lock = threading.Lock()  # proxy refusals arrive on the proxy's threads

    # -- what the context is given -------------------------------------------------------------

    def pattern(self) -> re.Pattern[str]:
        """The URLs to route: those of every origin that is not allowed."""
        allowed = sorted(re.escape(origin) for origin in self.allowed)
        if not allowed:
            return re.compile(r"^")
        return re.compile(rf"^(?!(?:{'|'.join(allowed)})(?:[/?#]|$))")

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
        with self._lock:
            record = {"url": url, "kind": kind, "reason": reason}
            if record not in self._records:
                self._records.append(record)

    def __call__(self, route: Route) -> None:
        request = route.request
        reason = refusal_reason(request.url, self.allowed) or "not allowed in this task"
        kind = request_kind(request)
        self._record(request.url, kind, reason)
        if kind == "frame":
            route.fulfill(status=403, content_type="text/html", body=blocked_page(request.url, reason))
        else:
            route.abort("blockedbyclient")

    def on_websocket(self, websocket: WebSocket) -> None:
        """A page opened a WebSocket: one to an origin that is not allowed is refused by the proxy."""
        reason = refusal_reason(websocket.url, self.allowed)
        if reason:
            self._record(websocket.url, "websocket", reason)

    def on_request_failed(self, request: Request) -> None:
        """A redirect hop the proxy refused (routing never sees hops)."""
        if request.redirected_from is None:
            return
        reason = refusal_reason(request.url, self.allowed)
        if reason:
            source = request.redirected_from.url
            self._record(request.url, request_kind(request), f"redirected from {source}; {reason}")

    def on_console(self, message: ConsoleMessage) -> None:
        """Chromium refuses links to file:// from a web page with nothing but a console line."""
        found = _LOCAL_RESOURCE.search(message.text)
        if found:
            self._record(found.group(1), "navigation", "file:// URLs cannot be opened from a web page")

    def drain(self) -> list[dict]:
        """The refusals since the last call: those seen through Playwright, plus any the proxy
        refused that no record names (a worker's request, a socket opened before Playwright knew)."""
        with self._lock:
            records, self._records = self._records, []
        for refused in self.proxy.drain() if self.proxy else []:
            covered = any(_same_target(refused.target, refused.tunnel, r["url"]) for r in records)
            if not covered:
                url = refused.target if not refused.tunnel else f"//{refused.target}"
                records.append({"url": url, "kind": "connection", "reason": "refused by the sandbox's proxy"})
        return records


def request_kind(request: Request) -> str:
    frame = frame_of_navigation(request)
    if frame:
        return "frame" if frame == "frame" else "navigation"
    return request.resource_type


def _same_target(target: str, tunnel: bool, url: str) -> bool:
    if not tunnel:
        return target == url
    parts = urllib.parse.urlsplit(as_http(url))
    port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
    return target.lower() in (f"{parts.hostname}:{port}", f"[{parts.hostname}]:{port}")

"""A small HTTP GET client for remote services: bounded timeouts, retries with exponential backoff
on transient failures (5xx, 429, connection errors), and a client-side rate limit.

Redirects are not followed here: a caller that follows them decides which hosts are allowed.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from email.message import Message

from sandboxes.search.config import HttpLimits

MAX_BACKOFF_S = 8.0
USER_AGENT = "agentworld-search/1 (+https://github.com/agentworld)"


@dataclass
class HttpReply:
    url: str
    status: int
    reason: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    truncated: bool = False

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def text(self) -> str:
        message = Message()
        message["content-type"] = self.headers.get("content-type", "")
        charset = message.get_content_charset() or "utf-8"
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:  # a charset name Python does not know
            return self.body.decode("utf-8", errors="replace")


class TransportError(OSError):
    """No HTTP reply at all (refused, reset, timed out, DNS) after every retry."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the 3xx reaches the caller as an HTTPError carrying its Location


def _transient(status: int) -> bool:
    return status == 429 or status >= 500


class HttpClient:
    """Thread-safe: one client may serve several threads; the rate limit is shared among them."""

    def __init__(self, limits: HttpLimits, max_bytes: int = 5 * 1024 * 1024) -> None:
        self.limits = limits
        self.max_bytes = max_bytes
        # No proxy handler: environment proxies must not see loopback corpus traffic.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
        self._lock = threading.Lock()
        self._next_slot = 0.0
        self.attempts = 0  # requests sent, retries included (for tests and stats)

    def get(self, url: str, headers: dict[str, str] | None = None) -> HttpReply:
        """The reply (any status, after retries of transient ones); TransportError when none came."""
        delay = self.limits.backoff_s
        for attempt in range(self.limits.retries + 1):
            last = attempt == self.limits.retries
            self._wait_for_slot()
            try:
                reply = self._once(url, headers or {})
            except TransportError:
                if last:
                    raise
            else:
                if not _transient(reply.status) or last:
                    return reply
                delay = max(delay, _retry_after(reply))
            time.sleep(min(delay, MAX_BACKOFF_S))
            delay = delay * 2 if delay else 0.0
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait_for_slot(self) -> None:
        rate = self.limits.rate_limit_per_s
        if rate <= 0:
            return
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next_slot)
            self._next_slot = slot + 1.0 / rate
        if slot > now:
            time.sleep(slot - now)

    def _once(self, url: str, headers: dict[str, str]) -> HttpReply:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **headers})
        self.attempts += 1
        try:
            with self._opener.open(request, timeout=self.limits.timeout_s) as response:
                return self._reply(url, response.status, response.reason, response.headers, response)
        except urllib.error.HTTPError as exc:
            with exc:
                return self._reply(url, exc.code, str(exc.reason), exc.headers, exc)
        except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TransportError(f"{type(reason).__name__}: {reason}") from exc

    def _reply(self, url: str, status: int, reason: str, headers: Message, stream: object) -> HttpReply:
        try:
            body = stream.read(self.max_bytes + 1)  # type: ignore[attr-defined]
        except (TimeoutError, OSError) as exc:
            raise TransportError(f"reading the body failed: {exc}") from exc
        lowered = {k.lower(): v for k, v in (headers or {}).items()}
        truncated = len(body) > self.max_bytes
        return HttpReply(url, status, reason, lowered, body[: self.max_bytes], truncated)


def _retry_after(reply: HttpReply) -> float:
    value = reply.headers.get("retry-after", "")
    try:
        return min(float(value), MAX_BACKOFF_S)
    except ValueError:
        return 0.0

"""The origin guard: every request of a browser context passes here, and only the task's allowed
origins (http/https) are reached; anything else is aborted as blocked by the client.

Playwright routes only the first request of a redirect chain: a redirect from an allowed origin to
another origin would be followed by the browser unchecked. Our own embedded sites never redirect
elsewhere, so their requests go straight to the browser's network stack. For any other allowed
origin the guard fetches the response itself without following redirects, checks each hop, and
hands the browser only what it may see; a navigation that was redirected gets a page that sends the
browser on to the final URL, so the address it shows is the real one and that request is checked
again.
"""

from __future__ import annotations

import json
import re
import urllib.parse

from playwright.sync_api import APIResponse, Route
from playwright.sync_api import Error as PlaywrightError

from sandboxes.web.config import SITES, origin_of, site_url
from sandboxes.web.execute import ActionFailed, check_url

EMBEDDED_ORIGINS = frozenset(origin_of(site_url(site)) for site in SITES)
REDIRECTS = (301, 302, 303, 307, 308)
MAX_HOPS = 10


class OriginGuard:
    def __init__(self, allowed_origins: set[str], timeout_ms: int) -> None:
        self.allowed = allowed_origins
        self.timeout_ms = timeout_ms
        self.blocked_navigations: list[str] = []  # cleared by the sandbox before each action

    def pattern(self) -> re.Pattern[str]:
        """The URLs the guard must see: all but those of the allowed embedded sites. Playwright
        matches a regular expression in its driver, so requests to our own sites (most of an
        episode's traffic) never make the round trip to Python."""
        trusted = sorted(re.escape(o) for o in EMBEDDED_ORIGINS & self.allowed)
        if not trusted:
            return re.compile(r"^")
        return re.compile(rf"^(?!(?:{'|'.join(trusted)})(?:[/?#]|$))")

    def allows(self, url: str) -> bool:
        try:
            check_url(url, self.allowed)
        except ActionFailed:
            return False
        return True

    def __call__(self, route: Route) -> None:
        request = route.request
        if not self.allows(request.url):
            self._block(route, request.url)
            return
        if origin_of(request.url) in EMBEDDED_ORIGINS:
            route.fallback()
            return
        try:
            response, final_url, blocked = self._follow(route)
        except PlaywrightError:
            route.abort("failed")
            return
        if blocked:
            self._block(route, blocked)
        elif final_url != request.url and request.is_navigation_request():
            target = json.dumps(final_url).replace("<", "\\u003c")
            route.fulfill(
                status=200,
                content_type="text/html",
                body=f"<!DOCTYPE html><script>location.replace({target})</script>",
            )
        else:
            route.fulfill(response=response)

    def _block(self, route: Route, url: str) -> None:
        if route.request.is_navigation_request():
            self.blocked_navigations.append(url)
        route.abort("blockedbyclient")

    def _follow(self, route: Route) -> tuple[APIResponse, str, str]:
        """(final response, its URL, "" or the first hop that is not allowed)."""
        url = route.request.url
        response = route.fetch(max_redirects=0, timeout=self.timeout_ms)
        for _ in range(MAX_HOPS):
            location = response.headers.get("location")
            if response.status not in REDIRECTS or not location:
                break
            url = urllib.parse.urljoin(url, location)
            if not self.allows(url):
                return response, url, url
            method = "GET" if response.status in (301, 302, 303) else route.request.method
            response = route.fetch(url=url, method=method, max_redirects=0, timeout=self.timeout_ms)
        return response, url, ""

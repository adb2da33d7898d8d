"""`web_extractor`: fetch a page over real HTTP and return its main text as Markdown (trafilatura).

Corpus URLs (`http://<corpus host>/...`) are fetched from the sandbox's loopback server, whatever
port it has today; other hosts only when the config allows them. Whatever goes wrong (a 404, a
refused connection, a blocked host, a PDF) becomes the observation the agent would see.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from typing import Any

import lxml.html
import trafilatura

from sandboxes.search.config import SearchConfig
from sandboxes.search.http_client import HttpClient, HttpReply, TransportError
from schemas.records import Observation

MARKDOWN = "markdown"
MAX_REDIRECTS = 5
CACHED_PAGES = 64
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("text/plain", "text/markdown", "application/json", "text/x-rst")


def _error(url: str, message: str, **data: Any) -> Observation:
    return Observation(format=MARKDOWN, text=f"Error: {message}", data={"url": url, "error": message, **data})


class PageFetcher:
    """`local` maps corpus host names to the loopback base URL that serves them. Other hosts are
    fetched when `config.fetch_hosts` names them, or holds "*" and they are not internal."""

    def __init__(self, config: SearchConfig, local: dict[str, str]) -> None:
        self.config = config
        self.local = local
        self.client = HttpClient(config.fetch, max_bytes=config.max_fetch_bytes)
        self._cache: dict[str, Observation] = {}

    def _route(self, url: str) -> str | None:
        """The URL to request for `url`, or None when this sandbox may not reach its host."""
        parts = urllib.parse.urlsplit(url)
        host = (parts.hostname or "").lower()
        if host in self.local:
            path = parts.path or "/"
            return self.local[host] + path + (f"?{parts.query}" if parts.query else "")
        if host in self.config.fetch_hosts or ("*" in self.config.fetch_hosts and not _internal(host)):
            return urllib.parse.urlunsplit(parts._replace(fragment=""))
        return None

    def fetch(self, url: str) -> Observation:
        """The page at `url` as an observation; corpus pages are static, so their extraction
        (seconds for the largest manual pages) is done once per sandbox and reused."""
        key = urllib.parse.urldefrag(url).url
        if (urllib.parse.urlsplit(url).hostname or "").lower() not in self.local:
            return self._fetch(url)
        cached = self._cache.pop(key, None)
        if cached is None:
            cached = self._fetch(key)
        self._cache[key] = cached  # most recently used last
        while len(self._cache) > CACHED_PAGES:
            self._cache.pop(next(iter(self._cache)))
        return Observation(cached.format, cached.text, {**cached.data, "url": url})

    def _fetch(self, url: str) -> Observation:
        current = url
        for _ in range(MAX_REDIRECTS + 1):
            target = self._route(current)
            if target is None:
                host = urllib.parse.urlsplit(current).hostname or current
                return _error(
                    url, f"could not fetch {current}: host {host} is not reachable from this sandbox"
                )
            try:
                reply = self.client.get(target, {"Accept": "text/html,text/plain;q=0.9,*/*;q=0.5"})
            except TransportError as exc:
                return _error(url, f"could not fetch {current}: {exc}")
            location = reply.headers.get("location")
            if 300 <= reply.status < 400 and location:
                current = urllib.parse.urljoin(current, location)
                continue
            return self._page(url, current, reply)
        return _error(url, f"too many redirects fetching {url}")

    def _page(self, url: str, final_url: str, reply: HttpReply) -> Observation:
        if reply.status >= 400:
            return _error(url, f"{reply.status} {reply.reason} for {url}", status=reply.status)
        media = reply.content_type or "text/html"
        if media in _HTML_TYPES:
            html = reply.text()
            title = _title(html)
            markdown = trafilatura.extract(
                html,
                url=final_url,
                output_format="markdown",
                include_tables=True,
                include_links=False,
                include_comments=False,
                favor_recall=True,
                fast=True,  # no fallback extractors: several times faster on the largest pages
            )
            body = markdown or "(no main text could be extracted from this page)"
        elif media in _TEXT_TYPES:
            title, body = "", reply.text()
        else:
            return _error(url, f"cannot extract text from {media} at {url}", status=reply.status)
        body, cut = self._bounded(body)
        head = [f"Title: {title}"] if title else []
        head.append(f"URL: {final_url}")
        data = {
            "url": url,
            "final_url": final_url,
            "status": reply.status,
            "title": title,
            "content_type": media,
            "chars": len(body),
            "truncated_chars": cut,
        }
        return Observation(format=MARKDOWN, text="\n".join(head) + "\n\n" + body, data=data)

    def _bounded(self, body: str) -> tuple[str, int]:
        limit = self.config.max_page_chars
        if len(body) <= limit:
            return body, 0
        cut = len(body) - limit
        return body[:limit].rstrip() + f"\n\n[... {cut} more characters not shown]", cut


def _title(html: str) -> str:
    try:
        found = lxml.html.fromstring(html).findtext(".//title")
    except (ValueError, lxml.etree.ParserError):
        return ""
    return " ".join((found or "").split())


def _internal(host: str) -> bool:
    """Loopback, private and link-local addresses: "*" does not open them, only naming them does,
    so an agent on the open web cannot reach services on the collector's own host or network."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local or address.is_unspecified

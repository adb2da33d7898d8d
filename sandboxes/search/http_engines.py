"""Search backends behind HTTP: a SearXNG instance's JSON API and any JSON search API by template.

A service that stays down (connection errors or 5xx after every retry) or answers something that
is not a search reply raises SandboxCrashedError: the episode ends `error` with the reason, rather
than recording an agent that sees a broken engine as if it were the environment.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

from sandboxes.base import SandboxCrashedError
from sandboxes.search.config import JsonApiBackend, SearxngBackend
from sandboxes.search.engines import SearchHit, SearchPage
from sandboxes.search.http_client import HttpClient, HttpReply, TransportError


def _json(reply: HttpReply, service: str, hint: str = "") -> Any:
    if reply.status >= 400:
        raise SandboxCrashedError(f"{service} answered {reply.status} {reply.reason} for {reply.url}{hint}")
    try:
        return json.loads(reply.text())
    except json.JSONDecodeError as exc:
        raise SandboxCrashedError(f"{service} did not answer JSON ({exc}) for {reply.url}{hint}") from exc


def _get(client: HttpClient, url: str, service: str, headers: dict[str, str] | None = None) -> HttpReply:
    try:
        return client.get(url, {"Accept": "application/json", **(headers or {})})
    except TransportError as exc:
        raise SandboxCrashedError(f"{service} is unreachable at {url}: {exc}") from exc


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if value not in (None, "") else ""


def dig(data: Any, path: str) -> Any:
    """The value at a dotted path ("data.items", "hits.0.url"); None where the path is missing."""
    for part in filter(None, path.split(".")):
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


class SearxngEngine:
    """GET {url}/search?q=..&format=json&pageno=..; an instance's page size is its own (it merges
    several engines), so the results of (num_results, page) are read from its pages 1, 2, ... in
    turn, at most 10 of them."""

    def __init__(self, backend: SearxngBackend) -> None:
        self.backend = backend
        self.client = HttpClient(backend.http)

    def _page(self, query: str, pageno: int) -> dict[str, Any]:
        params = {"q": query, "format": "json", "pageno": str(pageno)}
        if self.backend.categories:
            params["categories"] = self.backend.categories
        if self.backend.language:
            params["language"] = self.backend.language
        url = f"{self.backend.url.rstrip('/')}/search?{urllib.parse.urlencode(params)}"
        hint = " (is `json` listed under search.formats in the instance's settings.yml?)"
        reply = _get(self.client, url, "SearXNG")
        data = _json(reply, "SearXNG", hint if reply.status == 403 else "")
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise SandboxCrashedError(f"SearXNG reply has no results list: {str(data)[:200]}")
        return data

    def search(self, query: str, num_results: int, page: int) -> SearchPage:
        wanted_from = (page - 1) * num_results
        hits: list[SearchHit] = []
        total: int | None = None
        seen = 0
        pageno = 1
        while len(hits) < num_results:
            data = self._page(query, pageno)
            results = data["results"]
            if isinstance(data.get("number_of_results"), int) and data["number_of_results"] > 0:
                total = data["number_of_results"]
            for item in results:
                if seen >= wanted_from and len(hits) < num_results and isinstance(item, dict):
                    hits.append(_searxng_hit(item))
                seen += 1
            if not results or pageno >= 10:  # SearXNG instances rarely go deeper; bound the walk
                break
            pageno += 1
        return SearchPage(hits, total)

    def close(self) -> None:
        """Nothing held between requests."""


def _searxng_hit(item: dict[str, Any]) -> SearchHit:
    return SearchHit(
        url=_text(item.get("url")),
        title=_text(item.get("title")),
        snippet=_text(item.get("content")),
        date=_text(item.get("publishedDate")),
    )


class JsonApiEngine:
    """One GET per search page, from `url_template`; hits from `results_path` in the reply."""

    def __init__(self, backend: JsonApiBackend) -> None:
        self.backend = backend
        self.client = HttpClient(backend.http)

    def search(self, query: str, num_results: int, page: int) -> SearchPage:
        b = self.backend
        url = b.url_template.format(
            query=urllib.parse.quote_plus(query),
            page=page,
            count=num_results,
            offset=(page - 1) * num_results,
        )
        data = _json(_get(self.client, url, "search API", b.headers), "search API")
        items = dig(data, b.results_path)
        if not isinstance(items, list):
            raise SandboxCrashedError(
                f"search API reply has no list at {b.results_path!r}: {str(data)[:200]}"
            )
        hits = [
            SearchHit(
                url=_text(dig(item, b.url_key)),
                title=_text(dig(item, b.title_key)),
                snippet=_text(dig(item, b.snippet_key)),
                date=_text(dig(item, b.date_key)) if b.date_key else "",
            )
            for item in items[:num_results]
            if isinstance(item, dict)
        ]
        total = dig(data, b.total_path) if b.total_path else None
        return SearchPage(hits, total if isinstance(total, int) and not isinstance(total, bool) else None)

    def close(self) -> None:
        """Nothing held between requests."""

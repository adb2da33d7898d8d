"""HTTP search backends against real loopback HTTP servers that answer as SearXNG and a JSON API do.

The servers are real (sandboxes.http_server on 127.0.0.1); only the search service behind them is
ours, since no SearXNG instance can be installed here. The reply shape follows SearXNG's JSON API
(`/search?q=..&format=json&pageno=..` -> {"query", "number_of_results", "results": [{url, title,
content, publishedDate, engine}]}).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from sandboxes.base import SandboxCrashedError
from sandboxes.checks import check_sandbox
from sandboxes.http_server import LocalHTTPServer, Request, Response
from sandboxes.search import (
    HttpLimits,
    JsonApiBackend,
    SearchConfig,
    SearchSandbox,
    SearxngBackend,
    extract_action,
    search_action,
)
from schemas.records import Task

SEARXNG_PAGE_SIZE = 4
FAST = HttpLimits(timeout_s=2.0, retries=2, backoff_s=0.01, rate_limit_per_s=0.0)


class FakeSearxngService:
    """Answers /search like a SearXNG instance with json enabled; `failures` 503s come first."""

    def __init__(self, hits: int = 10, failures: int = 0, status: int = 200) -> None:
        self.hits, self.failures, self.status = hits, failures, status
        self.requests: list[dict[str, list[str]]] = []
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Response:
        with self.lock:
            self.requests.append(request.query)
            if self.failures > 0:
                self.failures -= 1
                return Response(503, "<h1>503 Service Unavailable</h1>")
        if self.status != 200:
            return Response(self.status, "<h1>Forbidden</h1>")
        if request.path != "/search" or request.query.get("format") != ["json"]:
            return Response(400, "bad request")
        query = request.query["q"][0]
        pageno = int(request.query.get("pageno", ["1"])[0])
        first = (pageno - 1) * SEARXNG_PAGE_SIZE
        results = [
            {
                "url": f"https://example.org/{query.replace(' ', '-')}/{n}",
                "title": f"Result {n} about {query}",
                "content": f"Snippet number {n}  with   spaces",
                "publishedDate": f"2024-05-{n + 1:02d}T00:00:00" if n % 2 == 0 else None,
                "engine": "duckduckgo",
            }
            for n in range(first, min(first + SEARXNG_PAGE_SIZE, self.hits))
        ]
        body = {"query": query, "number_of_results": self.hits, "results": results}
        return Response(200, json.dumps(body), "application/json")


@pytest.fixture
def searxng() -> Iterator[tuple[FakeSearxngService, LocalHTTPServer]]:
    service = FakeSearxngService()
    with LocalHTTPServer({"/": service}) as server:
        yield service, server


def _sandbox(server: LocalHTTPServer, http: HttpLimits = FAST, **config: object) -> SearchSandbox:
    backend = SearxngBackend(url=server.url(""), http=http)
    return SearchSandbox(SearchConfig(backend=backend, **config))  # type: ignore[arg-type]


def test_searxng_results_are_mapped_and_numbered(searxng: tuple[FakeSearxngService, LocalHTTPServer]) -> None:
    service, server = searxng
    with _sandbox(server) as box:
        box.reset(Task(id="sx"))
        observation = box.step(search_action("tantivy index", num_results=3)).observation
    assert observation.data["total"] == 10
    assert observation.data["results"][0] == {
        "rank": 1,
        "url": "https://example.org/tantivy-index/0",
        "title": "Result 0 about tantivy index",
        "snippet": "Snippet number 0 with spaces",
        "date": "2024-05-01T00:00:00",
    }
    assert observation.data["results"][1]["date"] == ""
    assert observation.text.splitlines()[:5] == [
        'Results 1-3 of about 10 for "tantivy index"',
        "",
        "[1] https://example.org/tantivy-index/0",
        "Title: Result 0 about tantivy index",
        "Snippet: Snippet number 0 with spaces",
    ]
    assert service.requests[0]["format"] == ["json"] and service.requests[0]["q"] == ["tantivy index"]


def test_searxng_pages_are_stitched_to_the_requested_size(
    searxng: tuple[FakeSearxngService, LocalHTTPServer],
) -> None:
    service, server = searxng
    with _sandbox(server) as box:
        box.reset(Task(id="sx"))
        observation = box.step(search_action("q", num_results=3, page=2)).observation
    assert [r["url"] for r in observation.data["results"]] == [
        f"https://example.org/q/{n}" for n in (3, 4, 5)
    ]
    assert [r["rank"] for r in observation.data["results"]] == [4, 5, 6]
    assert [q["pageno"] for q in service.requests] == [["1"], ["2"]]


def test_a_503_is_retried_then_succeeds(searxng: tuple[FakeSearxngService, LocalHTTPServer]) -> None:
    service, server = searxng
    service.failures = 2
    with _sandbox(server) as box:
        box.reset(Task(id="retry"))
        observation = box.step(search_action("q", num_results=2)).observation
    assert len(observation.data["results"]) == 2
    assert len(service.requests) == 3  # two 503s, then the answer


def test_a_service_that_stays_down_crashes_the_episode(
    searxng: tuple[FakeSearxngService, LocalHTTPServer],
) -> None:
    service, server = searxng
    service.failures = 100
    with _sandbox(server) as box:
        box.reset(Task(id="down"))
        with pytest.raises(SandboxCrashedError, match="SearXNG answered 503"):
            box.step(search_action("q"))
    assert len(service.requests) == FAST.retries + 1


def test_json_disabled_names_the_setting() -> None:
    with LocalHTTPServer({"/": FakeSearxngService(status=403)}) as server, _sandbox(server) as box:
        box.reset(Task(id="403"))
        with pytest.raises(SandboxCrashedError, match="search.formats in the instance's settings.yml"):
            box.step(search_action("q"))


def test_an_unreachable_instance_crashes_with_the_reason() -> None:
    backend = SearxngBackend(url="http://127.0.0.1:1", http=HttpLimits(retries=1, backoff_s=0.01))
    with SearchSandbox(SearchConfig(backend=backend)) as box:
        box.reset(Task(id="gone"))
        with pytest.raises(SandboxCrashedError, match="SearXNG is unreachable at http://127.0.0.1:1/search"):
            box.step(search_action("q"))


def test_a_slow_instance_hits_the_timeout() -> None:
    def slow(request: Request) -> Response:
        time.sleep(1.5)
        return Response(200, "{}", "application/json")

    limits = HttpLimits(timeout_s=0.3, retries=0)
    with LocalHTTPServer({"/": slow}) as server, _sandbox(server, http=limits) as box:
        box.reset(Task(id="slow"))
        started = time.monotonic()
        with pytest.raises(SandboxCrashedError, match="timed out"):
            box.step(search_action("q"))
        assert time.monotonic() - started < 1.2


def test_the_rate_limit_spaces_requests(searxng: tuple[FakeSearxngService, LocalHTTPServer]) -> None:
    _service, server = searxng
    limits = HttpLimits(timeout_s=2.0, retries=0, rate_limit_per_s=10.0)
    with _sandbox(server, http=limits) as box:
        box.reset(Task(id="rate"))
        started = time.monotonic()
        for _ in range(5):
            box.step(search_action("q", num_results=2))
        elapsed = time.monotonic() - started
    assert elapsed >= 0.4, f"5 requests at 10/s took only {elapsed:.3f}s"


def test_json_api_backend_by_template() -> None:
    seen: list[dict[str, list[str]]] = []

    def api(request: Request) -> Response:
        seen.append(request.query)
        offset, count = int(request.query["offset"][0]), int(request.query["count"][0])
        items = [
            {"link": f"https://docs.example/{n}", "name": f"Doc {n}", "meta": {"summary": f"about {n}"}}
            for n in range(offset, offset + count)
        ]
        return Response(
            200, json.dumps({"data": {"items": items}, "stats": {"total": 99}}), "application/json"
        )

    with LocalHTTPServer({"/": api}) as server:
        backend = JsonApiBackend(
            url_template=server.url("/v1/search?q={query}&count={count}&offset={offset}"),
            results_path="data.items",
            url_key="link",
            title_key="name",
            snippet_key="meta.summary",
            total_path="stats.total",
            headers={"X-Api-Key": "k"},
            http=FAST,
        )
        with SearchSandbox(SearchConfig(backend=backend)) as box:
            box.reset(Task(id="api"))
            observation = box.step(search_action("a&b c", num_results=2, page=3)).observation
    assert seen == [{"q": ["a&b c"], "count": ["2"], "offset": ["4"]}]
    assert observation.text.startswith('Results 5-6 of about 99 for "a&b c"')
    assert observation.data["results"][1] == {
        "rank": 6,
        "url": "https://docs.example/5",
        "title": "Doc 5",
        "snippet": "about 5",
        "date": "",
    }


def test_extractor_fetches_allowed_hosts_and_follows_redirects() -> None:
    article = (
        "<html><head><title>Tantivy notes</title></head><body><article><h1>Tantivy</h1>"
        + ("<p>Tantivy is a full-text search engine library written in Rust, inspired by Lucene.</p>" * 5)
        + "</article></body></html>"
    )

    def site(request: Request) -> Response:
        if request.path == "/old":
            return Response(301, "", headers={"Location": "/article"})
        if request.path == "/away":
            return Response(302, "", headers={"Location": "http://elsewhere.example/x"})
        if request.path == "/article":
            return Response(200, article)
        if request.path == "/file.pdf":
            return Response(200, b"%PDF-1.4", "application/pdf")
        return Response(404, "<h1>404 Not Found</h1>")

    with LocalHTTPServer({"/": site}) as pages, LocalHTTPServer({"/": FakeSearxngService()}) as engine:
        with _sandbox(engine, fetch_hosts=("127.0.0.1",)) as box:
            box.reset(Task(id="fetch"))
            moved = box.step(extract_action(pages.url("/old"))).observation
            away = box.step(extract_action(pages.url("/away"))).observation
            pdf = box.step(extract_action(pages.url("/file.pdf"))).observation
    assert moved.text.startswith(f"Title: Tantivy notes\nURL: {pages.url('/article')}\n\n")
    assert "full-text search engine library written in Rust" in moved.text
    assert moved.data["final_url"] == pages.url("/article") and moved.data["url"] == pages.url("/old")
    assert away.text == (
        "Error: could not fetch http://elsewhere.example/x: "
        "host elsewhere.example is not reachable from this sandbox"
    )
    assert pdf.text == f"Error: cannot extract text from application/pdf at {pages.url('/file.pdf')}"


def test_searxng_sandbox_passes_check_sandbox(searxng: tuple[FakeSearxngService, LocalHTTPServer]) -> None:
    _service, server = searxng
    check_sandbox(_sandbox(server), Task(id="check"), [search_action("q"), search_action("q", page=2)])


def test_any_host_still_excludes_internal_addresses(
    searxng: tuple[FakeSearxngService, LocalHTTPServer],
) -> None:
    _service, server = searxng
    with _sandbox(server, fetch_hosts=("*",)) as box:
        box.reset(Task(id="ssrf"))
        for url in (
            "http://127.0.0.1:9/",
            "http://localhost/",
            "http://10.1.2.3/",
            "http://[::1]/",
            "http://169.254.169.254/",
        ):
            observation = box.step(extract_action(url)).observation
            assert observation.text.endswith("is not reachable from this sandbox"), (url, observation.text)

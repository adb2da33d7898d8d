"""The search sandbox: `web_search` against a backend chosen by config, `web_extractor` over HTTP.

With the embedded tantivy backend the sandbox also serves the corpus's pages on a loopback port
of its own, so `web_extractor` fetches them for real; HTTP backends fetch the pages their results
name, from the hosts the config allows.
"""

from __future__ import annotations

from typing import Any

from sandboxes.base import (
    InvalidActionError,
    Sandbox,
    SandboxClosedError,
    SandboxCrashedError,
    SandboxError,
    StepResult,
)
from sandboxes.http_server import LocalHTTPServer, static_app
from sandboxes.search.actions import ANSWER, DEFAULT_NUM_RESULTS, WEB_EXTRACTOR, WEB_SEARCH, parse_action
from sandboxes.search.build import SITE_SUBDIR, load_manifest
from sandboxes.search.config import (
    JsonApiBackend,
    SearchConfig,
    SearxngBackend,
    TantivyBackend,
    config_to_dict,
)
from sandboxes.search.engines import SearchEngine, TantivyEngine
from sandboxes.search.http_engines import JsonApiEngine, SearxngEngine
from sandboxes.search.pages import PageFetcher
from sandboxes.search.render import SEARCH_RESULTS, empty_query_observation, search_observation
from sandboxes.search.verify import KIND as ANSWER_VERIFIER
from sandboxes.search.verify import verify_answer
from schemas.records import Action, Environment, Observation, Step, Task, Verification

INITIAL_TEXT = "A web search engine is ready. No search has been made yet."
ANSWER_RECORDED = "Answer recorded."


class SearchSandbox(Sandbox):
    domain = "search"

    def __init__(self, config: SearchConfig | None = None) -> None:
        self.config = config or SearchConfig()
        self._engine: SearchEngine | None = None
        self._fetcher: PageFetcher | None = None
        self._server: LocalHTTPServer | None = None
        self._manifest: dict[str, Any] = {}
        self._closed = False

    def start(self) -> None:
        if self._engine is not None:
            return
        if self._closed:
            raise SandboxClosedError("this search sandbox was closed; create a new one")
        backend = self.config.backend
        local: dict[str, str] = {}
        try:
            if isinstance(backend, TantivyBackend):
                engine: SearchEngine = self._start_embedded(backend, local)
            elif isinstance(backend, SearxngBackend):
                engine = SearxngEngine(backend)
            elif isinstance(backend, JsonApiBackend):
                engine = JsonApiEngine(backend)
            else:
                raise SandboxError(f"unknown search backend {backend!r}")
        except FileNotFoundError as exc:
            self._stop_server()
            raise SandboxError(str(exc)) from exc
        self._engine = engine
        self._fetcher = PageFetcher(self.config, local)

    def _start_embedded(self, backend: TantivyBackend, local: dict[str, str]) -> TantivyEngine:
        if not backend.index_dir:
            raise FileNotFoundError(
                "the tantivy backend needs index_dir (python -m sandboxes.search build-index)"
            )
        engine = TantivyEngine(backend.index_dir, self.config.snippet_chars)
        self._manifest = load_manifest(backend.index_dir) or {}
        self._server = LocalHTTPServer({"/": static_app(f"{backend.index_dir}/{SITE_SUBDIR}")}).start()
        for host in self._manifest.get("hosts", []):
            local[host] = self._server.url(f"/{host}")
        return engine

    def reset(self, task: Task) -> Observation:
        self._check_running()
        data: dict[str, Any] = {"backend": self.config.backend.kind}
        if self._manifest:
            data["documents"] = self._manifest.get("documents")
        return Observation(format=SEARCH_RESULTS, text=INITIAL_TEXT, data=data)

    def step(self, action: Action) -> StepResult:
        self._check_running()
        # Policies may build Actions by hand: validate them the way parse_action would.
        checked = parse_action(action.kind, action.arguments)
        assert self._engine is not None and self._fetcher is not None
        if checked.kind == WEB_EXTRACTOR:
            return StepResult(self._fetcher.fetch(checked.arguments["url"]))
        if checked.kind == WEB_SEARCH:
            return StepResult(self._search(checked.arguments))
        if checked.kind == ANSWER:
            # `verify` reads the answer back from the recorded step; the engine has nothing to do. The
            # domain's own format, so a simulator predicting this line needs no special case.
            ack = Observation(
                format=SEARCH_RESULTS, text=ANSWER_RECORDED, data={"answer": checked.arguments["text"]}
            )
            return StepResult(ack, done=True)
        raise InvalidActionError(f"unknown search action kind {checked.kind!r}")

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        if task.verifier.get("kind") == ANSWER_VERIFIER:
            return verify_answer(task.verifier, steps)
        return super().verify(task, steps)

    def _search(self, arguments: dict[str, Any]) -> Observation:
        query = arguments["query"]
        if not query.strip():
            return empty_query_observation(query)
        num_results = arguments.get("num_results", DEFAULT_NUM_RESULTS)
        page = arguments.get("page", 1)
        assert self._engine is not None
        found = self._engine.search(query.strip(), num_results, page)
        return search_observation(query.strip(), num_results, page, found)

    def _check_running(self) -> None:
        if self._closed or self._engine is None:
            raise SandboxClosedError("the search sandbox is not started (or was closed)")
        if self._server is not None and not self._server.alive:
            raise SandboxCrashedError("the sandbox's page server stopped")

    def _stop_server(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
        self._stop_server()
        self._engine = None
        self._fetcher = None
        self._closed = True

    @property
    def alive(self) -> bool:
        if self._closed or self._engine is None:
            return False
        return self._server is None or self._server.alive

    def describe(self) -> Environment:
        config = config_to_dict(self.config)
        if self._manifest:
            # How the index was built, so a replay elsewhere can rebuild the same corpus.
            config["backend"]["build"] = self._manifest.get("build", {})
            config["documents"] = self._manifest.get("documents")
            config["sources"] = self._manifest.get("sources")
        return Environment(name="search", backend=self.config.backend.kind, config=config)

    def resources(self) -> list[str]:
        """Nothing outlives the sandbox but its server thread: no processes, containers or temp dirs."""
        return []

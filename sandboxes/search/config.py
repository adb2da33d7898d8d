"""Search sandbox configuration: which engine answers `web_search` is a backend chosen by config.

Each backend is a small frozen dataclass discriminated by `kind` (SWE-ReX style). `config_to_dict`
and `config_from_dict` round-trip a SearchConfig through the trajectory's `environment.config`, so
a recorded episode can be replayed in a fresh sandbox like the one it came from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class HttpLimits:
    """How an HTTP client treats a remote service: every wait is bounded."""

    timeout_s: float = 10.0
    retries: int = 3  # extra attempts after a 5xx, 429 or connection error
    backoff_s: float = 0.5  # first retry delay; doubles each retry
    rate_limit_per_s: float = 2.0  # requests per second at most, per client (0: unlimited)

    def __post_init__(self) -> None:
        if self.timeout_s <= 0 or self.retries < 0 or self.backoff_s < 0 or self.rate_limit_per_s < 0:
            raise ValueError("http limits need timeout_s > 0, retries >= 0, backoff_s >= 0, rate >= 0")


@dataclass(frozen=True)
class TantivyBackend:
    """An embedded tantivy index built by `python -m sandboxes.search build-index`.

    `index_dir` holds the index, the served site and manifest.json; `build` records how it was
    built, so a replay on a machine without it can rebuild the same corpus.
    """

    kind: Literal["tantivy"] = "tantivy"
    index_dir: str = ""
    build: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SearxngBackend:
    """A SearXNG instance's JSON API (`format=json` must be enabled in its settings.yml)."""

    kind: Literal["searxng"] = "searxng"
    url: str = "http://127.0.0.1:8888"
    categories: str = ""  # e.g. "general,it"; empty: the instance's default
    language: str = ""
    http: HttpLimits = field(default_factory=HttpLimits)


@dataclass(frozen=True)
class JsonApiBackend:
    """Any JSON search API: a URL template and dotted paths into its reply.

    The template may use {query} (URL-encoded), {page}, {count} and {offset} (0-based first
    result), e.g. "https://api.example/search?q={query}&count={count}&offset={offset}".
    """

    kind: Literal["json_api"] = "json_api"
    url_template: str = ""
    results_path: str = "results"
    url_key: str = "url"
    title_key: str = "title"
    snippet_key: str = "snippet"
    date_key: str = ""
    total_path: str = ""  # where the reply gives the total hit count, if anywhere
    headers: dict[str, str] = field(default_factory=dict)
    http: HttpLimits = field(default_factory=HttpLimits)

    def __post_init__(self) -> None:
        if "{query}" not in self.url_template:
            raise ValueError("json_api url_template must contain {query}")


Backend = TantivyBackend | SearxngBackend | JsonApiBackend
BACKENDS: dict[str, type[TantivyBackend] | type[SearxngBackend] | type[JsonApiBackend]] = {
    "tantivy": TantivyBackend,
    "searxng": SearxngBackend,
    "json_api": JsonApiBackend,
}


@dataclass(frozen=True)
class SearchConfig:
    backend: Backend = field(default_factory=TantivyBackend)
    # Hosts web_extractor may fetch besides the corpus's own; ("*",) allows any.
    fetch_hosts: tuple[str, ...] = ()
    fetch: HttpLimits = field(default_factory=lambda: HttpLimits(retries=2, rate_limit_per_s=0.0))
    max_fetch_bytes: int = 5 * 1024 * 1024
    # Cap on an extracted page's Markdown; the rest is cut with a note saying how much.
    max_page_chars: int = 20_000
    snippet_chars: int = 240


def make_backend(name: str, **opts: Any) -> Backend:
    """Build a backend config by name ("tantivy", "searxng", "json_api") with its options."""
    try:
        cls = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown search backend {name!r}; choose one of {sorted(BACKENDS)}") from None
    if isinstance(opts.get("http"), dict):
        opts["http"] = HttpLimits(**opts["http"])
    return cls(**opts)


def config_to_dict(config: SearchConfig) -> dict[str, Any]:
    data = dataclasses.asdict(config)
    data["fetch_hosts"] = list(config.fetch_hosts)
    return data


def config_from_dict(data: dict[str, Any]) -> SearchConfig:
    """Inverse of config_to_dict; ValueError naming the problem when `data` is not one."""
    try:
        backend = dict(data["backend"])
        kind = backend.pop("kind")
        return SearchConfig(
            backend=make_backend(kind, **backend),
            fetch_hosts=tuple(data.get("fetch_hosts", ())),
            fetch=HttpLimits(**data.get("fetch", {})),
            max_fetch_bytes=int(data.get("max_fetch_bytes", 5 * 1024 * 1024)),
            max_page_chars=int(data.get("max_page_chars", 20_000)),
            snippet_chars=int(data.get("snippet_chars", 240)),
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a search sandbox config: {exc}") from exc

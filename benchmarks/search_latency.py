"""Search step latency: `web_search` through the sandbox against raw tantivy calls, same run, same
index (>= 10,000 documents of the embedded corpus) and the same queries.

Baselines, cheapest first:
- raw_search: `index.parse_query` + `searcher.search(limit=10, count=True)`, the engine alone;
- raw_search_docs: the same plus loading the 10 stored documents, the least a result list needs.
Ours adds action validation, the syntax fallback, snippets and the rendered observation.
Also reported, not targeted: `web_extractor` on pages not fetched before (loopback HTTP + trafilatura).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import tantivy

from benchmarks.timing import latency_ms
from collectors.tasks import embedded_tasks
from sandboxes.search import (
    BuildParams,
    SearchConfig,
    SearchSandbox,
    TantivyBackend,
    default_index_dir,
    ensure_index,
    extract_action,
    search_action,
)
from schemas.records import Task

TARGET_MEDIAN_MS = 20.0
INDEX_LIMIT = 12_000
ROUNDS = 5
# Queries as agents write them, syntax included: the sandbox must answer these without crashing.
EXTRA_QUERIES = ['"unmatched quote', "title:asyncio", "os.path AND join", "socket timeout -ssl", "(grep"]


def _queries() -> list[str]:
    queries = [q for spec in embedded_tasks("search") for q in spec.task.metadata["queries"]]
    return queries + EXTRA_QUERIES


def _timed(call: Callable[[str], object], queries: list[str], rounds: int) -> list[float]:
    for query in queries:  # warm-up: page cache, tantivy's lazily opened segments
        call(query)
    samples = []
    for _ in range(rounds):
        for query in queries:
            started = time.perf_counter()
            call(query)
            samples.append(time.perf_counter() - started)
    return samples


def _raw(index: tantivy.Index, searcher: tantivy.Searcher, load_docs: bool) -> Callable[[str], object]:
    def run(query: str) -> object:
        try:
            parsed = index.parse_query(query, ["title", "body"], field_boosts={"title": 2.0})
        except ValueError:  # raw tantivy has no fallback: count the failed parse as the call
            return None
        result = searcher.search(parsed, limit=10, count=True)
        if load_docs:
            return [searcher.doc(address) for _score, address in result.hits]
        return result

    return run


def search_latency(limit: int = INDEX_LIMIT, rounds: int = ROUNDS) -> dict:
    params = BuildParams(limit=limit)
    index_dir = default_index_dir(params)
    manifest = ensure_index(index_dir, params, progress=True)
    queries = _queries()
    index = tantivy.Index.open(str(index_dir / "index"))
    searcher = index.searcher()
    latency = {
        "raw_search": latency_ms(_timed(_raw(index, searcher, load_docs=False), queries, rounds)),
        "raw_search_docs": latency_ms(_timed(_raw(index, searcher, load_docs=True), queries, rounds)),
    }
    with SearchSandbox(SearchConfig(backend=TantivyBackend(index_dir=str(index_dir)))) as sandbox:
        sandbox.reset(Task(id="bench"))
        latency["ours_web_search"] = latency_ms(
            _timed(lambda q: sandbox.step(search_action(q)), queries, rounds)
        )
        latency["ours_web_search_page2"] = latency_ms(
            _timed(lambda q: sandbox.step(search_action(q, page=2)), queries, 1)
        )
        urls: list[str] = []
        for query in queries:
            for result in sandbox.step(search_action(query)).observation.data["results"][:1]:
                if result["url"].split("#")[0] not in {u.split("#")[0] for u in urls}:
                    urls.append(result["url"])
        extract = []
        for url in urls[:30]:  # each page once: the sandbox caches extractions
            started = time.perf_counter()
            sandbox.step(extract_action(url))
            extract.append(time.perf_counter() - started)
        latency["ours_web_extractor_first_fetch"] = latency_ms(extract)
    ours = latency["ours_web_search"]["median_ms"]
    return {
        "documents": manifest["documents"],
        "sources": manifest["sources"],
        "queries": len(queries),
        "rounds": rounds,
        "latency": latency,
        "ratios": {
            "ours_over_raw_search": ours / latency["raw_search"]["median_ms"],
            "ours_over_raw_search_docs": ours / latency["raw_search_docs"]["median_ms"],
        },
        "target_median_ms": TARGET_MEDIAN_MS,
        "met": ours <= TARGET_MEDIAN_MS and manifest["documents"] >= 10_000,
    }


def markdown_lines(r: dict) -> list[str]:
    lines = [
        f"Index: {r['documents']:,} documents ({', '.join(f'{n:,} {s}' for s, n in r['sources'].items())}); "
        f"{r['queries']} queries x {r['rounds']} rounds.\n",
        "| call | median ms | p95 ms | n | ratio to raw_search |",
        "|---|---|---|---|---|",
    ]
    raw = r["latency"]["raw_search"]["median_ms"]
    for name, v in r["latency"].items():
        lines.append(
            f"| {name} | {v['median_ms']:.2f} | {v['p95_ms']:.2f} | {v['n']} | {v['median_ms'] / raw:.1f}x |"
        )
    lines.append(
        f"\nTarget: median `web_search` <= {r['target_median_ms']:.0f} ms on >= 10,000 documents: "
        f"{'met' if r['met'] else 'NOT met'}."
    )
    return lines

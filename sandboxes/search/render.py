"""The canonical text of a `web_search` observation, and its structured `data`.

    Results 11-20 of about 1,234 for "asyncio gather"

    [11] http://docs.python.agentworld.test/3.11/library/asyncio-task.html#asyncio.gather
    Title: asyncio.gather — Coroutines and Tasks — Python 3.11.2 documentation
    Snippet: Run awaitable objects in the aws sequence concurrently. ...
    Date: 2026-10-07

Results are numbered by overall rank, so page 2 continues where page 1 stopped.
"""

from __future__ import annotations

from sandboxes.search.engines import SearchPage
from schemas.records import Observation

SEARCH_RESULTS = "search_results"
EMPTY_QUERY = "Error: the search query is empty; give one or more words to search for."


def empty_query_observation(query: str) -> Observation:
    return Observation(
        format=SEARCH_RESULTS, text=EMPTY_QUERY, data={"query": query, "error": "empty query", "results": []}
    )


def _about(total: int | None) -> str:
    return f" of about {total:,}" if total is not None else ""


def search_observation(query: str, num_results: int, page: int, found: SearchPage) -> Observation:
    first = (page - 1) * num_results + 1
    results = [
        {"rank": first + i, "url": hit.url, "title": hit.title, "snippet": hit.snippet, "date": hit.date}
        for i, hit in enumerate(found.hits)
    ]
    data = {
        "query": query,
        "page": page,
        "num_results": num_results,
        "total": found.total,
        "results": results,
    }
    if found.note:
        data["note"] = found.note
    lines: list[str] = []
    if not results:
        if page > 1 and found.total:
            lines.append(f'No results on page {page} for "{query}" (about {found.total:,} results in all).')
        else:
            lines.append(f'No results for "{query}".')
    else:
        last = first + len(results) - 1
        lines.append(f'Results {first}-{last}{_about(found.total)} for "{query}"')
    if found.note:
        lines.append(f"({found.note})")
    for result in results:
        lines += ["", f"[{result['rank']}] {result['url']}", f"Title: {result['title']}"]
        if result["snippet"]:
            lines.append(f"Snippet: {result['snippet']}")
        if result["date"]:
            lines.append(f"Date: {result['date']}")
    return Observation(format=SEARCH_RESULTS, text="\n".join(lines), data=data)

"""The search domain's form (sandboxes/search/render.py): where the real turn listed results, numbered
results `[n] url` with http(s) URLs, ranked one after another. An extracted page or an error is text."""

from __future__ import annotations

from training.observations.parsers import parse_results
from training.rewards.verifiers.verdict import Failure

CHECKS = {
    "search.results": "the real turn listed results and the prediction has no numbered `[n] url` result",
    "search.ranks": "result numbers that do not follow one another",
    "search.urls": "a result URL that is not http(s)",
}


def search_failures(prediction: str, reference: str) -> list[Failure]:
    if not parse_results(reference):
        return []
    results = parse_results(prediction)
    if not results:
        return [Failure("search.results", "no `[n] url` result lines")]
    failures = []
    ranks = [r.rank for r in results]
    if ranks != list(range(ranks[0], ranks[0] + len(ranks))):
        failures.append(Failure("search.ranks", f"ranks {ranks[:6]} are not consecutive"))
    bad = [r.url for r in results if not r.url.startswith(("http://", "https://"))]
    if bad:
        failures.append(Failure("search.urls", f"{bad[0][:50]!r} is not an http(s) URL"))
    return failures

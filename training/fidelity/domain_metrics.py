"""Metrics suited to a domain's observation form, beside the text metrics every domain gets (pure).

MCP and SWE tool results have their own module (tool_metrics.py), registered here. A domain's record
(sandboxes.domains) names its scorer in SCORERS.

- web: line F1 over the accessibility tree's node lines, with the `[bid]`s kept (a node must carry
  the id the page gave it) and with them removed (the same nodes, whatever ids); whether the URL and
  the title match.
- os (desktop): node-line F1 on (role, name, value) without ids and positions, with states, the
  share of nodes placed within a pixel tolerance, the focused window and the error (desktop.py).
- android: node F1 on (class, text, description, resource id) without indexes and bounds, with flags,
  the share of nodes placed within a pixel tolerance, the package, activity and error (android.py).
- search: for result lists, precision/recall/F1 of the result URLs as sets, overlap@k (the share of
  the real top k that the predicted top k holds) and rank agreement (the share of the real top k
  predicted at the same rank); for extracted pages (and error texts), line F1 over the non-empty lines.

Every metric is scored against the recorded text, so a second real run (the noise floor) gets the
same metrics: its scores are the ceiling these numbers are read against. A metric that does not
apply to a turn is None and left out of the means.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sandboxes.domains import find_domain
from training.fidelity.android import ANDROID_METRICS, android_scores
from training.fidelity.desktop import DESKTOP_METRICS, desktop_scores
from training.fidelity.overlap import multiset_f1
from training.fidelity.tool_metrics import MCP_METRICS, SWE_METRICS, mcp_scores, swe_scores
from training.observations.parsers import parse_results, parse_web, without_bids

TOP_K = 5

WEB_METRICS = ("tree_f1", "tree_f1_no_bids", "url_match", "title_match")
SEARCH_METRICS = ("result_precision", "result_recall", "result_f1", f"overlap_at_{TOP_K}", "rank_agreement")
SEARCH_PAGE_METRICS = ("page_line_f1",)


def web_scores(prediction: str, reference: str) -> dict[str, float | None]:
    pred, real = parse_web(prediction), parse_web(reference)
    scores: dict[str, float | None] = {
        "tree_f1": multiset_f1(pred.tree, real.tree),
        "tree_f1_no_bids": multiset_f1(
            [without_bids(n) for n in pred.tree], [without_bids(n) for n in real.tree]
        ),
        "url_match": None,
        "title_match": None,
    }
    if real.has_header:  # an error observation from the runner has no page to compare with
        scores["url_match"] = float(pred.url == real.url)
        scores["title_match"] = float(pred.title == real.title)
    return scores


def search_scores(prediction: str, reference: str) -> dict[str, float | None]:
    scores: dict[str, float | None] = dict.fromkeys(SEARCH_METRICS + SEARCH_PAGE_METRICS)
    real = [r.url for r in parse_results(reference)]
    if not real:
        lines = [line.rstrip() for line in prediction.split("\n") if line.strip()]
        ref_lines = [line.rstrip() for line in reference.split("\n") if line.strip()]
        scores["page_line_f1"] = multiset_f1(lines, ref_lines)
        return scores
    predicted = [r.url for r in parse_results(prediction)]
    common = len(set(predicted) & set(real))
    p = common / len(set(predicted)) if predicted else 0.0
    r = common / len(set(real))
    k = min(TOP_K, len(real))
    scores.update(
        result_precision=p,
        result_recall=r,
        result_f1=2 * p * r / (p + r) if p + r else 0.0,
        rank_agreement=sum(1 for a, b in zip(predicted[:k], real[:k], strict=False) if a == b) / k,
    )
    scores[f"overlap_at_{TOP_K}"] = len(set(predicted[:k]) & set(real[:k])) / k
    return scores


@dataclass(frozen=True)
class Scorer:
    metrics: tuple[str, ...]  # the names of the scores it gives
    # (prediction, reference, others): `others` are the other real runs of the turn (the noise floor's
    # replays), which the tool-result scorers read for the volatile values.
    score: Callable[[str, str, Sequence[str]], dict[str, float | None]]


def _ignoring_others(scorer: Callable[[str, str], dict[str, float | None]]) -> Callable:
    return lambda prediction, reference, others: scorer(prediction, reference)


# The scorers a domain's record names (sandboxes.domains.DomainSpec.scorer), by that name.
SCORERS = {
    "web_scores": Scorer(WEB_METRICS, _ignoring_others(web_scores)),
    "search_scores": Scorer(SEARCH_METRICS + SEARCH_PAGE_METRICS, _ignoring_others(search_scores)),
    "desktop_scores": Scorer(DESKTOP_METRICS, _ignoring_others(desktop_scores)),
    "android_scores": Scorer(ANDROID_METRICS, _ignoring_others(android_scores)),
    "mcp_scores": Scorer(MCP_METRICS, mcp_scores),
    "swe_scores": Scorer(SWE_METRICS, swe_scores),
}
# Every domain's own metric names, each once (two tree domains share node_f1).
ALL_DOMAIN_METRICS = tuple(dict.fromkeys(m for scorer in SCORERS.values() for m in scorer.metrics))


def _scorer(domain: str) -> Scorer | None:
    spec = find_domain(domain)
    return SCORERS[spec.scorer] if spec and spec.scorer else None


def domain_metrics(domain: str) -> tuple[str, ...]:
    """The names of the domain's own metrics; () for a domain with none beyond the text metrics and
    for a name that is no domain (a report's "overall")."""
    scorer = _scorer(domain)
    return scorer.metrics if scorer else ()


def domain_scores(
    domain: str, prediction: str, reference: str, others: Sequence[str] = ()
) -> dict[str, float | None]:
    """The domain's own metrics of one turn ({} for a domain that has none beyond the text metrics);
    `others`: other real runs of the turn, where the noise floor replayed it."""
    scorer = _scorer(domain)
    return scorer.score(prediction, reference, others) if scorer else {}

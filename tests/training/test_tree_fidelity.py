"""What the tree domains (android's UI tree, os's accessibility tree) share in the format verifier and
the fidelity metrics, one row a domain; each domain's own reading of its text is tested beside it
(test_android_fidelity, test_desktop_fidelity)."""

from __future__ import annotations

import pytest

from tests.training.test_android_fidelity import CLOCK
from tests.training.test_android_fidelity import RENUMBERED as RENUMBERED_CLOCK
from tests.training.test_desktop_fidelity import CALCULATOR
from tests.training.test_desktop_fidelity import RENUMBERED as RENUMBERED_CALCULATOR
from training.fidelity.android import ANDROID_METRICS
from training.fidelity.desktop import DESKTOP_METRICS
from training.fidelity.domain_metrics import domain_metrics, domain_scores
from training.fidelity.metrics import aggregate, score_turn
from training.observations.template import Template
from training.rewards.verifiers import format_valid

# domain, a real screen, the same screen renumbered and moved, its metrics, an error screen, the
# screen with one node pushed two levels too deep, and the metric of the header line.
COLUMNS = ("domain", "screen", "renumbered", "metrics", "error", "too_deep", "header")
DOMAINS = [
    pytest.param(
        "android",
        CLOCK,
        RENUMBERED_CLOCK,
        ANDROID_METRICS,
        "Error: no node 40\nPackage: unknown  Activity: unknown",
        CLOCK.replace("\n    [4]", "\n        [4]"),
        "package_match",
        id="android",
    ),
    pytest.param(
        "os",
        CALCULATOR,
        RENUMBERED_CALCULATOR,
        DESKTOP_METRICS,
        "Error: nothing at (1, 1)\nFocused: none",
        CALCULATOR.replace("\n  [1]", "\n      [1]"),
        "focused_match",
        id="os",
    ),
]


@pytest.mark.parametrize(COLUMNS, DOMAINS)
def test_format_verifier_wants_the_tree_form_where_the_real_turn_had_it(
    domain: str, screen: str, renumbered: str, metrics: tuple, error: str, too_deep: str, header: str
) -> None:
    assert format_valid(domain, screen, screen)
    assert format_valid(domain, error, screen)
    assert not format_valid(domain, screen.split("\n", 1)[1], screen)  # no header line
    assert not format_valid(domain, screen + "\nThe screen shows it.", screen)  # prose
    assert not format_valid(domain, too_deep, screen)
    # A turn the runner recorded as an invalid action is not in the tree form: any tree-ish text.
    assert format_valid(domain, "invalid action: bad", "invalid action: x")


@pytest.mark.parametrize(COLUMNS, DOMAINS)
def test_turn_scores_and_aggregates_carry_the_domain_metrics(
    domain: str, screen: str, renumbered: str, metrics: tuple, error: str, too_deep: str, header: str
) -> None:
    assert set(domain_metrics(domain)) == set(metrics)
    assert domain_scores(domain, screen, screen)["node_f1"] == 1.0
    row = score_turn(domain, renumbered, Template.stable(screen)).as_dict()
    assert row["format_valid"] and row["position_within_tolerance"] == 1.0
    summary = aggregate([{**row, "domain": domain, "turn_idx": 1}])
    assert summary["by_domain"][domain]["node_f1"] == row["node_f1"]


@pytest.mark.parametrize(COLUMNS, DOMAINS)
def test_the_same_screen_scores_one_and_an_error_or_nothing_scores_zero(
    domain: str, screen: str, renumbered: str, metrics: tuple, error: str, too_deep: str, header: str
) -> None:
    assert domain_scores(domain, screen, screen) == dict.fromkeys(metrics, 1.0)
    assert domain_scores(domain, "Error: x\n" + screen, screen)["error_match"] == 0.0
    nothing = domain_scores(domain, "", screen)
    assert nothing["error_match"] == nothing[header] == nothing["node_f1"] == 0.0
    # Both sides refused the action: there is no tree to compare, so no verdict rather than a zero.
    refused = domain_scores(domain, "invalid action: x", "invalid action: x")
    assert refused["error_match"] is refused[header] is refused["position_within_tolerance"] is None

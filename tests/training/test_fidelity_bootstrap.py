"""The paired cluster bootstrap and the comparison built on it, on series whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from training.fidelity.bootstrap import paired_difference
from training.fidelity.comparison import (
    compare,
    comparison_table,
    find_difference,
    main_score,
    rate_table,
    summary_lines,
)


def series(
    levels: list[float], turns: int = 4, shift: float = 0.0, noise: float = 0.0, seed: int = 1
) -> dict:
    """(trajectory, turn) -> score: each trajectory at its own level, plus `shift`, plus turn noise."""
    rng = np.random.default_rng(seed)
    return {
        (f"t{i}", k): level + shift + noise * float(rng.standard_normal())
        for i, level in enumerate(levels)
        for k in range(1, turns + 1)
    }


LEVELS = [0.1 + 0.8 * i / 19 for i in range(20)]  # trajectories differ far more than the systems do


def test_a_known_difference_gives_an_interval_around_it_that_excludes_zero() -> None:
    base = series(LEVELS, noise=0.05, seed=1)
    rng = np.random.default_rng(3)
    better = {key: value + 0.1 + 0.05 * float(rng.standard_normal()) for key, value in base.items()}
    d = paired_difference(better, base)
    assert d.turns == 80 and d.trajectories == 20
    assert 0.05 < d.difference < 0.15
    assert d.ci_low < d.difference < d.ci_high and d.ci_low > 0 and d.excludes_zero
    assert d.as_dict()["excludes_zero"] is True
    # a fixed seed: the same interval every time; another seed, nearly the same one
    assert paired_difference(better, base) == d
    other = paired_difference(better, base, seed=7)
    assert other.ci_low != d.ci_low and abs(other.ci_low - d.ci_low) < 0.01


def test_systems_that_differ_only_by_noise_give_an_interval_that_contains_zero() -> None:
    a = series(LEVELS, noise=0.05, seed=1)
    b = series(LEVELS, noise=0.05, seed=2)
    d = paired_difference(a, b)
    assert d.ci_low < 0 < d.ci_high and not d.excludes_zero
    same = paired_difference(a, dict(a))
    assert same.difference == same.ci_low == same.ci_high == 0.0 and not same.excludes_zero


def test_pairing_matters_turns_are_matched_by_key_not_by_order() -> None:
    # A constant +0.02 on every turn, hidden under trajectory levels from 0.1 to 0.9: paired, it is
    # certain; the same scores paired with another trajectory's turns show nothing.
    base = series(LEVELS)
    better = {key: value + 0.02 for key, value in base.items()}
    d = paired_difference(dict(reversed(better.items())), base)
    assert d.difference == pytest.approx(0.02) and d.ci_low == pytest.approx(0.02)
    assert d.ci_high == pytest.approx(0.02) and d.excludes_zero
    mispaired = {(f"t{(int(t[1:]) + 7) % 20}", k): v for (t, k), v in better.items()}
    wrong = paired_difference(mispaired, base)
    assert wrong.ci_low < 0 < wrong.ci_high and not wrong.excludes_zero


def test_trajectories_not_turns_are_resampled() -> None:
    # One long trajectory carries the whole difference; nine short ones show none. Over 59 independent
    # turns the difference would look certain; over 10 trajectories, a resample without the long one
    # is common (0.9 ** 10 = 35%), so the interval reaches 0.
    a = {("long", k): 1.0 for k in range(50)} | {(f"short{i}", 0): 0.0 for i in range(9)}
    b = dict.fromkeys(a, 0.0)
    d = paired_difference(a, b)
    assert d.trajectories == 10 and d.turns == 59 and d.difference == pytest.approx(50 / 59)
    assert d.ci_low == 0.0 and not d.excludes_zero


def test_only_shared_turns_pair_and_one_trajectory_gives_no_interval() -> None:
    a = {("t0", 1): 0.5, ("t0", 2): 0.7, ("t1", 1): 0.9}
    b = {("t0", 1): 0.4, ("t0", 2): 0.4}
    d = paired_difference(a, b)
    assert d.turns == 2 and d.trajectories == 1 and d.difference == pytest.approx(0.2)
    assert d.ci_low is None and d.ci_high is None and not d.excludes_zero
    with pytest.raises(ValueError, match="share no scored turn"):
        paired_difference({("t0", 1): 1.0}, {("t9", 1): 1.0})


def rows(domain: str, scores: dict, **extra: object) -> list[dict]:
    return [
        {"domain": domain, "trajectory_id": t, "turn_idx": k, "edit_similarity": 0.5, **extra, **m}
        for (t, k), m in scores.items()
    ]


def test_comparison_per_domain_main_metric_ceiling_and_rates() -> None:
    base = series(LEVELS[:8], turns=2)
    web = {key: {"tree_f1": v} for key, v in base.items()}
    web_better = {key: {"tree_f1": v + 0.2} for key, v in base.items()}
    # search: result lists score result_f1; extracted pages (no result_f1) score page_line_f1
    search = {("s0", 1): {"result_f1": 0.5, "page_line_f1": None}, ("s0", 2): {"page_line_f1": 0.9}}
    search |= {("s1", 1): {"result_f1": 0.3}, ("s1", 2): {"result_f1": None, "page_line_f1": 0.1}}
    systems = {
        "repeat_previous": rows("web", web, format_valid=True) + rows("search", search, format_valid=True),
        "model": rows("web", web_better, format_valid=True, verified=True)
        + rows("search", search, format_valid=False, verified=False),
        "base": rows("web", web, format_valid=False, verified=False)
        + rows("search", search, format_valid=False, verified=False),
    }
    ceiling = rows("web", {("r", 1): {"tree_f1": 0.9}, ("r", 2): {"tree_f1": 0.7}})
    roles = {"repeat_previous": "baseline", "model": "model", "base": "base"}
    out = compare(systems, ceiling, roles)
    assert out["systems"] == ["model", "base", "repeat_previous"]
    assert out["reference"] == "base" and out["baseline"] == "repeat_previous"
    assert out["main_metric"]["search"] == ["result_f1", "page_line_f1", "edit_similarity"]
    web_entry, search_entry = out["domains"]["web"], out["domains"]["search"]
    assert web_entry["main_metric"] == "tree_f1" and web_entry["ceiling"] == pytest.approx(0.8)
    assert web_entry["values"]["model"] == pytest.approx(web_entry["values"]["base"] + 0.2)
    assert search_entry["values"]["model"] == pytest.approx((0.5 + 0.9 + 0.3 + 0.1) / 4)
    assert search_entry["ceiling"] is None
    assert web_entry["format_valid"] == {"model": 1.0, "base": 0.0, "repeat_previous": 1.0}
    assert web_entry["verified"]["model"] == 1.0 and web_entry["verified"]["repeat_previous"] is None
    pairs = [(d["a"], d["b"]) for d in web_entry["differences"]]
    assert pairs == [("model", "base"), ("model", "repeat_previous"), ("base", "repeat_previous")]
    model_vs_base = find_difference(web_entry, "model", "base")
    assert model_vs_base["excludes_zero"] and model_vs_base["difference"] == pytest.approx(0.2)
    flipped = find_difference(web_entry, "base", "model")
    assert flipped["difference"] == pytest.approx(-0.2) and flipped["ci_high"] == -model_vs_base["ci_low"]
    summary = {(s["a"], s["b"]): s for s in out["summary"]}
    assert summary[("model", "base")]["better_in"] == ["web"] and summary[("model", "base")]["worse_in"] == []
    lines = summary_lines(out)
    assert lines[0].startswith("model vs base: better in 1 of 2 domains (web), worse in 0 (none)")
    assert lines[1].startswith("model vs repeat_previous: better in 1 of 2 domains (web)")
    header, body = comparison_table(out)
    assert header[:6] == ["domain", "main metric", "real vs real", "model", "base", "repeat_previous"]
    assert "model - base (95% CI)" in header and "base - repeat_previous (95% CI)" in header
    web_row = body[[r[0] for r in body].index("web")]
    assert web_row[header.index("model - base (95% CI)")].startswith("+0.200 [+0.200, +0.200]*")
    # the verifier pass rate gets its own paired interval; a system without verdicts pairs with nothing
    passed = find_difference(web_entry, "model", "base", "verified_differences")
    assert passed["difference"] == 1.0 and passed["excludes_zero"]
    assert find_difference(web_entry, "model", "repeat_previous", "verified_differences") is None
    header, body = rate_table(out)
    web_row = body[[r[0] for r in body].index("web")]
    assert web_row[header.index("model - base verified (95% CI)")].startswith("+1.000 [+1.000, +1.000]*")
    assert web_row[header.index("model - repeat_previous verified (95% CI)")] == "-"


def test_a_turn_without_its_domain_metric_falls_back_to_edit_similarity() -> None:
    assert (
        main_score({"domain": "mcp", "json_value_match": None, "json_key_f1": 0.4, "edit_similarity": 0.1})
        == 0.4
    )
    assert main_score({"domain": "mcp", "json_value_match": None, "edit_similarity": 0.1}) == 0.1
    assert main_score({"domain": "terminal", "edit_similarity": 0.3, "tree_f1": 0.9}) == 0.3
    assert main_score({"domain": "a-new-domain", "edit_similarity": 0.6}) == 0.6

"""MCP results compared as JSON structure and SWE results on exit status, lines, diffs and test counts,
with volatile values found by the noise floor, on trajectories built in the forms of the contract."""

from __future__ import annotations

import json

import pytest

from tests.schemas.mcp_swe_records import (
    EDIT_DIFF,
    PYTEST_FAIL,
    UNKNOWN_TOOL,
    mcp_text,
    mcp_trajectory,
    swe_trajectory,
    time_result,
)
from training.fidelity.metrics import aggregate, score_against, score_turn
from training.fidelity.noise_floor import build_noise_floor
from training.fidelity.replay import Replay
from training.fidelity.report import build_report, domain_tables
from training.fidelity.tool_metrics import leaves, mcp_scores, summary_counts, swe_scores, volatile_paths
from training.observations.template import Template
from training.rewards.verifiers import format_valid

WHEN = "2026-11-30T10:30:00+01:00"


def _floor(recorded, replayed):
    """The noise floor of `recorded` from real runs given as trajectories of the same actions."""
    runs = [
        Replay(recorded.trajectory_id, i, [s.observation.text for s in t.steps])
        for i, t in enumerate(replayed)
    ]
    return build_noise_floor([recorded], {recorded.trajectory_id: runs})


def _score(floor, t, k, prediction):
    return score_against(t.domain, prediction, floor.templates_for(t, k))


def test_json_leaves_descend_into_text_items_that_hold_json() -> None:
    found = leaves(json.loads(mcp_text(time_result(WHEN))))
    assert found[("content", 0, "text", "<json>", "datetime")] == WHEN
    assert found[("isError",)] is False and found[("content", 0, "type")] == "text"
    assert leaves({"a": [], "b": {}}) == {("a",): [], ("b",): {}}


@pytest.fixture(scope="module")
def mcp_runs():
    recorded = mcp_trajectory("mcp-rec", when=WHEN, entity_id="e-7f3a")
    replays = [
        mcp_trajectory("mcp-rep1", when="2026-11-30T10:30:04+01:00", entity_id="e-9c1b"),
        mcp_trajectory("mcp-rep2", when="2026-11-30T10:31:17+01:00", entity_id="e-02dd"),
    ]
    return recorded, _floor(recorded, replays)


def test_volatile_json_values_are_the_ones_real_runs_changed(mcp_runs) -> None:
    recorded, floor = mcp_runs
    time_text = recorded.steps[0].observation.text
    volatile, variants = volatile_paths(
        json.loads(time_text), floor.templates[(recorded.trajectory_id, 1)][0].others
    )
    assert volatile == {("content", 0, "text", "<json>", "datetime")}
    assert variants[("content", 0, "text", "<json>", "datetime")] == ["2026-11-30T10:31:17+01:00"]
    # Real vs real: every stable value agrees and every volatile one keeps its form.
    for row in floor.real_vs_real:
        if row["turn_idx"] in (1, 2):
            assert (row["json_valid"], row["json_key_f1"], row["json_value_match"]) == (1.0, 1.0, 1.0), row
            assert row["json_volatile_form"] == 1.0 and row["result_kind_match"] == 1.0
    assert {r["turn_idx"]: r["json_volatile_form"] for r in floor.real_vs_real}[
        3
    ] is None  # an error: no volatility


def test_a_prediction_is_held_to_stable_values_and_volatile_forms(mcp_runs) -> None:
    recorded, floor = mcp_runs
    # Another real-looking time: right with the noise floor, a value mismatch without it.
    other_time = mcp_text(time_result("2026-11-30T23:59:59+01:00"))
    scored = _score(floor, recorded, 1, other_time)
    assert scored["json_value_match"] == 1.0 and scored["json_volatile_form"] == 1.0
    bare = mcp_scores(other_time, recorded.steps[0].observation.text)
    assert bare["json_volatile_form"] is None and bare["json_value_match"] < 1.0
    # A stable value wrong (the weekday), and a volatile one in another form.
    wrong_day = mcp_text(time_result(WHEN, day="Tuesday"))
    assert _score(floor, recorded, 1, wrong_day)["json_value_match"] < 1.0
    assert _score(floor, recorded, 1, mcp_text(time_result("tomorrow")))["json_volatile_form"] == 0.0
    # A result where the server answered a protocol error; prose instead of JSON.
    unknown = _score(floor, recorded, 3, mcp_text(time_result(WHEN)))
    assert unknown["result_kind_match"] == 0.0 and unknown["json_key_f1"] == 0.0
    prose = _score(floor, recorded, 3, "The tool get_weather does not exist.")
    assert (prose["json_valid"], prose["json_key_f1"], prose["format_valid"]) == (0.0, 0.0, False)
    assert _score(floor, recorded, 3, mcp_text(UNKNOWN_TOOL))["json_value_match"] == 1.0
    # The first observation is text: the JSON metrics do not apply.
    assert set(mcp_scores("x", recorded.initial_observation.text).values()) == {None}


def test_deeply_nested_predictions_are_scored_not_raised() -> None:
    real = mcp_text(time_result(WHEN))
    for depth in (40, 5000):  # under and over the JSON parser's own limit
        nested = "[" * depth + "]" * depth
        scored = score_turn("mcp", nested, Template.stable(real)).as_dict()
        assert scored["json_value_match"] == 0.0 and scored["format_valid"] is False
        assert scored["json_valid"] == float(depth == 40)


def test_mcp_verifier_wants_a_result_or_an_error_object() -> None:
    real = mcp_text(time_result(WHEN))
    assert format_valid("mcp", real, real)
    assert format_valid("mcp", mcp_text(UNKNOWN_TOOL), real)
    assert not format_valid("mcp", '{"content": "not a list", "isError": false}', real)
    assert not format_valid("mcp", '{"error": {"message": "no code"}}', real)
    assert not format_valid("mcp", "[1, 2]", real)


@pytest.fixture(scope="module")
def swe_runs():
    recorded = swe_trajectory("swe-rec", seconds="0.03")
    return recorded, _floor(
        recorded, [swe_trajectory("r1", seconds="0.05"), swe_trajectory("r2", seconds="0.04")]
    )


def test_swe_real_runs_agree_once_timings_are_volatile(swe_runs) -> None:
    recorded, floor = swe_runs
    for row in floor.real_vs_real:
        assert row["output_line_f1"] == 1.0, row
        if row["turn_idx"] in (1, 5):
            assert row["exit_status_match"] == 1.0 and row["test_counts_match"] == 1.0
    assert {r["turn_idx"]: r["diff_line_f1"] for r in floor.real_vs_real if r["replay"] == 0}[4] == 1.0


def test_swe_predictions_on_status_counts_lines_and_diffs(swe_runs) -> None:
    recorded, floor = swe_runs
    slower = PYTEST_FAIL.format(seconds="1.25")
    assert _score(floor, recorded, 1, slower)["output_line_f1"] == 1.0
    assert swe_scores(slower, recorded.steps[0].observation.text)["output_line_f1"] < 1.0  # no noise floor
    passing = slower.replace("1 failed, 3 passed", "4 passed").replace("[exit status: 1]", "[exit status: 0]")
    scored = _score(floor, recorded, 1, passing)
    assert (scored["exit_status_match"], scored["test_counts_match"]) == (0.0, 0.0)
    timed_out = _score(floor, recorded, 1, "....\n[timed out after 60 s]")
    assert timed_out["exit_status_match"] == 0.0 and timed_out["format_valid"] is True
    assert _score(floor, recorded, 1, "1 failed, 3 passed in 0.1s")["format_valid"] is False  # no status line
    # An edit that adds the wrong line: the removed line agrees, the added one does not.
    wrong = EDIT_DIFF.replace("+        return high\n", "+        return low\n")
    edit = _score(floor, recorded, 4, wrong)
    assert edit["diff_line_f1"] == pytest.approx(0.5) and edit["exit_status_match"] is None
    assert _score(floor, recorded, 4, "I changed the file.")["format_valid"] is False
    assert (
        _score(floor, recorded, 2, "1\tdef clamp(value, low, high):")["format_valid"] is False
    )  # not cat -n


def test_test_summaries_of_pytest_and_unittest() -> None:
    assert summary_counts("== 1 failed, 3 passed, 2 warnings in 0.12s ==") == {
        "failed": 1,
        "passed": 3,
        "warnings": 2,
    }
    assert summary_counts("...\n1 error in 0.30s\n[exit status: 2]") == {"errors": 1}
    unittest = "..F\n" + "-" * 70 + "\nRan 3 tests in 0.001s\n\nFAILED (failures=1)"
    assert summary_counts(unittest) == {"ran": 3, "ok": 0, "failures": 1}
    assert summary_counts("Ran 2 tests in 0.000s\n\nOK") == {"ran": 2, "ok": 1}
    assert summary_counts("no summary here") is None


def test_reports_show_the_tool_metrics_per_domain(mcp_runs, swe_runs) -> None:
    rows = []
    for recorded, floor in (mcp_runs, swe_runs):
        for k, step in enumerate(recorded.steps, start=1):
            row = _score(floor, recorded, k, step.observation.text)
            rows.append(
                {**row, "domain": recorded.domain, "turn_idx": k, "prediction": step.observation.text}
            )
    summary = aggregate(rows)["by_domain"]
    assert summary["mcp"]["json_value_match"] == 1.0 and summary["swe"]["exit_status_match"] == 1.0
    report = build_report({"model/teacher_forced": rows}, {}, {})
    headers = {domain: header for domain, header, _ in domain_tables(report)}
    assert "json_key_f1" in headers["mcp"] and "test_counts_match" in headers["swe"]
    # A single template without replays scores the recording exactly.
    step = mcp_runs[0].steps[1]
    assert score_turn("mcp", step.observation.text, Template.stable(step.observation.text)).exact

"""A delta model's fidelity run (--base none) paired with the full model's run's base and
repeat-previous rows, as the bench world_model does, on turns.jsonl files shaped as training.fidelity
writes them.

Scores are multiples of 1/4 so every mean is exact in binary; where every trajectory differs by the same
amount the bootstrap interval is that amount exactly, and with two trajectories it spans the means of
drawing one of them twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.fidelity.paired_runs import paired_comparison, planned_turns, read_turns, require_same_decoding

TERMINAL_RUN = Path(__file__).resolve().parents[1] / "beam_pipelines" / "fixtures" / "terminal_run"
FULL, DELTA = "the full form's run", "the delta form's run"


def row(series: str, domain: str, trajectory: str, turn: int, **metrics: float | bool) -> dict:
    """One line of a fidelity run's turns.jsonl (the fields the comparison reads, and a few it does not)."""
    system = series.split("/")[0]
    return {
        "series": series,
        "system": system,
        "mode": "teacher_forced",
        "domain": domain,
        "trajectory_id": trajectory,
        "turn_idx": turn,
        "tagged": True,
        "prediction": "",
        "error": "",
        **metrics,
    }


def terminal(series: str, scores: list[float], valid: list[bool]) -> list[dict]:
    keys = [("t1", 1), ("t1", 2), ("t2", 1), ("t2", 2)]
    return [
        row(series, "terminal", t, k, edit_similarity=s, format_valid=v)
        for (t, k), s, v in zip(keys, scores, valid, strict=True)
    ]


def os_turn(series: str, node_f1: float, edit_similarity: float, verified: bool) -> dict:
    # os's main metric is node_f1: edit_similarity, set apart from it, must not be the one read
    return row(
        series,
        "os",
        "o1",
        1,
        node_f1=node_f1,
        edit_similarity=edit_similarity,
        format_valid=True,
        verified=verified,
    )


def repeat_previous() -> list[dict]:
    series = "repeat_previous/teacher_forced"
    return [*terminal(series, [1.0, 0.5, 0.0, 0.5], [True] * 4), os_turn(series, 1.0, 0.0, True)]


def full_run() -> list[dict]:
    """The first form's run: its own model (never read), the base and repeat-previous."""
    model, base = "model/teacher_forced", "base/teacher_forced"
    return [
        *terminal(model, [0.0] * 4, [False] * 4),
        os_turn(model, 0.0, 0.0, False),
        *terminal(base, [0.5, 0.5, 0.25, 0.25], [False] * 4),
        os_turn(base, 0.25, 1.0, False),
        *repeat_previous(),
    ]


def delta_run() -> list[dict]:
    """A --base none run: the delta model and its own repeat-previous rows, no base."""
    model = "model/teacher_forced"
    return [
        *terminal(model, [0.75, 0.75, 0.5, 0.5], [True, False, True, True]),
        os_turn(model, 0.5, 0.0, True),
        *repeat_previous(),
    ]


def write_run(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    (folder / "turns.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def difference(
    a: str, b: str, value: float, low: float | None, high: float | None, turns: int, trajectories: int
):
    excludes = low is not None and high is not None and (low > 0 or high < 0)
    return {
        "a": a,
        "b": b,
        "difference": value,
        "ci_low": low,
        "ci_high": high,
        "turns": turns,
        "trajectories": trajectories,
        "excludes_zero": excludes,
    }


def test_the_delta_model_is_compared_on_the_full_runs_base_and_repeat_previous(tmp_path: Path) -> None:
    full = read_turns(write_run(tmp_path / "fidelity-full", full_run()))
    delta = read_turns(write_run(tmp_path / "fidelity-delta", delta_run()))
    assert sorted(full) == ["base/teacher_forced", "model/teacher_forced", "repeat_previous/teacher_forced"]
    assert sorted(delta) == ["model/teacher_forced", "repeat_previous/teacher_forced"]

    c = paired_comparison(full, delta, (FULL, DELTA))

    assert c["systems"] == ["model", "base", "repeat_previous"]
    assert (c["reference"], c["baseline"]) == ("base", "repeat_previous")
    assert c["paired_with"] == {"run": FULL, "systems": ["base", "repeat_previous"]}
    assert list(c["domains"]) == ["os", "terminal"]
    term = c["domains"]["terminal"]
    assert (term["main_metric"], term["turns"], term["trajectories"], term["ceiling"]) == (
        "edit_similarity",
        4,
        2,
        None,
    )
    assert term["values"] == {"model": 0.625, "base": 0.375, "repeat_previous": 0.5}
    assert term["format_valid"] == {"model": 0.75, "base": 0.0, "repeat_previous": 1.0}
    assert term["differences"] == [
        # each trajectory +0.25 over the base: every resample's mean is +0.25
        difference("model", "base", 0.25, 0.25, 0.25, 4, 2),
        # per trajectory 0 and +0.25 (t1: -0.25 and +0.25; t2: +0.5 and 0)
        difference("model", "repeat_previous", 0.125, 0.0, 0.25, 4, 2),
        difference("base", "repeat_previous", -0.125, -0.25, 0.0, 4, 2),
    ]
    assert "verified" not in term
    os_entry = c["domains"]["os"]
    assert (os_entry["main_metric"], os_entry["turns"], os_entry["trajectories"]) == ("node_f1", 1, 1)
    assert os_entry["values"] == {"model": 0.5, "base": 0.25, "repeat_previous": 1.0}
    assert os_entry["differences"] == [  # one trajectory: no interval
        difference("model", "base", 0.25, None, None, 1, 1),
        difference("model", "repeat_previous", -0.5, None, None, 1, 1),
        difference("base", "repeat_previous", -0.75, None, None, 1, 1),
    ]
    assert os_entry["verified"] == {"model": 1.0, "base": 0.0, "repeat_previous": 1.0}
    assert os_entry["verified_differences"][0] == difference("model", "base", 1.0, None, None, 1, 1)
    assert c["summary"] == [
        {"a": "model", "b": "base", "better_in": ["terminal"], "worse_in": [], "domains": ["os", "terminal"]},
        {
            "a": "model",
            "b": "repeat_previous",
            "better_in": [],
            "worse_in": [],
            "domains": ["os", "terminal"],
        },
        {"a": "base", "b": "repeat_previous", "better_in": [], "worse_in": [], "domains": ["os", "terminal"]},
    ]


def test_runs_that_scored_different_turns_are_refused(tmp_path: Path) -> None:
    full = read_turns(write_run(tmp_path / "full", full_run()))
    short = [r for r in delta_run() if (r["trajectory_id"], r["turn_idx"]) != ("t2", 2)]
    with pytest.raises(
        ValueError, match=r"1 turn\(s\) only in the base rows of the full form's run \(e\.g\. terminal/t2#2\)"
    ):
        paired_comparison(full, read_turns(write_run(tmp_path / "short", short)), (FULL, DELTA))

    extra = [*delta_run(), row("model/teacher_forced", "terminal", "t3", 1, edit_similarity=0.5)]
    with pytest.raises(
        ValueError,
        match=r"1 turn\(s\) only in the model rows of the delta form's run \(e\.g\. terminal/t3#1\)",
    ):
        paired_comparison(full, read_turns(write_run(tmp_path / "extra", extra)), (FULL, DELTA))


def test_a_repeat_previous_that_scores_differently_means_other_recordings(tmp_path: Path) -> None:
    full = read_turns(write_run(tmp_path / "full", full_run()))
    changed = delta_run()
    moved = next(
        r
        for r in changed
        if r["series"].startswith("repeat") and r["trajectory_id"] == "t1" and r["turn_idx"] == 2
    )
    moved["edit_similarity"] = 0.25
    with pytest.raises(
        ValueError, match=r"repeat-previous scores 1 turn\(s\) differently .* \('terminal', 't1', 2\)"
    ):
        paired_comparison(full, read_turns(write_run(tmp_path / "changed", changed)), (FULL, DELTA))


def test_a_first_run_without_base_rows_or_turns_is_refused(tmp_path: Path) -> None:
    no_base = [r for r in full_run() if r["series"] != "base/teacher_forced"]
    delta = read_turns(write_run(tmp_path / "delta", delta_run()))
    with pytest.raises(ValueError, match="the full form's run has no base rows to pair with"):
        paired_comparison(read_turns(write_run(tmp_path / "no-base", no_base)), delta, (FULL, DELTA))
    with pytest.raises(ValueError, match=r"missing-run/turns\.jsonl is missing"):
        read_turns(tmp_path / "missing-run")


def test_planned_turns_are_the_first_held_out_trajectories_turns(tmp_path: Path) -> None:
    held = [
        "terminal-s0-000000-86f373a9bb2b",
        "terminal-s0-000002-95e0bb04e072",
        "terminal-s0-000005-77a98589aba7",
    ]
    bench = tmp_path / "corpus" / "agentworldbench"
    bench.mkdir(parents=True)
    (bench / "terminal_test.jsonl").write_text("".join(json.dumps({"id": f"{t}:1"}) + "\n" for t in held))
    # in the fixture's order 000000 (6 steps) comes before 000002 (8 steps); 000005 is past the limit
    planned = planned_turns(str(TERMINAL_RUN), str(tmp_path / "corpus"), trajectories=2, turns=7)
    assert planned == {("terminal", held[0], k) for k in range(1, 7)} | {
        ("terminal", held[1], k) for k in range(1, 8)
    }


def test_runs_that_decoded_differently_are_refused(tmp_path: Path) -> None:
    generation = {"temperature": 0.0, "stop": ["</predicted_observation>"], "include_stop": True}
    for name, extra in (("full", {"max_new_tokens_by_domain": [["terminal", 600]]}), ("delta", {})):
        (tmp_path / name).mkdir()
        meta = {"meta": {"generation": {**generation, **extra}}}
        (tmp_path / name / "report.json").write_text(json.dumps(meta))
    require_same_decoding(tmp_path / "full", tmp_path / "delta")  # bounds follow each model's form
    meta = {"meta": {"generation": {**generation, "stop": [], "include_stop": False}}}
    (tmp_path / "delta" / "report.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="decoded differently .*stop: .*include_stop: True in"):
        require_same_decoding(tmp_path / "full", tmp_path / "delta")

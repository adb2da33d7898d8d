"""The project's candidate scorer for reasoning synthesis (training/candidates.py), on recorded
terminal observations; the judge part against the real local server."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas import read_trajectories
from schemas.records import Observation
from schemas.render import chat_messages, target_text
from tests.llm_server import LLMServer
from training.candidates import score

FIXTURE = Path(__file__).parents[1] / "beam_pipelines" / "fixtures" / "terminal_run"


@pytest.fixture(scope="module")
def turn() -> tuple[list[dict], str]:
    t = min(read_trajectories(str(FIXTURE)), key=lambda t: t.trajectory_id)
    return chat_messages(t, 2), t.steps[1].observation.text


def test_the_real_observation_with_reasoning_scores_full_marks(turn):
    messages, reference = turn
    reply = target_text(Observation("terminal_screen", reference), "The command prints its output.")
    assert score("terminal", messages, reference, reply) == {
        "score": 1.0,
        "verified": True,
        "fidelity": 1.0,
        "judge": None,
    }


def test_a_reply_without_the_tag_scores_zero(turn):
    messages, reference = turn
    assert score("terminal", messages, reference, f"I think it shows:\n{reference}")["score"] == 0.0


def test_praise_inside_the_block_fails_the_verifiers_but_keeps_most_fidelity(turn):
    messages, reference = turn
    praised = f"{reference}\nThis simulated output is accurate and realistic."
    result = score("terminal", messages, reference, target_text(Observation("terminal_screen", praised)))
    assert result["verified"] is False
    assert 0.5 < result["fidelity"] < 1.0
    assert result["score"] == pytest.approx(result["fidelity"] / 2)


def test_a_judge_adds_its_mean_percent(turn, llm_server: LLMServer):
    messages, reference = turn
    reply = target_text(Observation("terminal_screen", reference))
    result = score("terminal", messages, reference, reply, judge_url=llm_server.base_url)
    # the 135M judge may not give five readable scores; then it is no part of the score
    if result["judge"] is None:
        assert result["score"] == pytest.approx((result["fidelity"] + 1.0) / 2)
    else:
        assert 0.0 <= result["judge"] <= 1.0
        assert result["score"] == pytest.approx((result["fidelity"] + 1.0 + result["judge"]) / 3)

"""The judge's chat: the record's own context at turn_idx, the reference at turn_idx, nothing later."""

from __future__ import annotations

import pytest

from schemas import read_trajectories
from schemas.render import agentworldbench_record, record_messages, reference_observation
from tests.training.conftest import TERMINAL_RUN
from training.rewards.judge import DIMENSIONS, judge_messages, parse_judge_reply, sample_score, summarise


@pytest.fixture(scope="module")
def full_record() -> dict:
    """A record whose lists run to the end of a real trajectory, read at turn 3, with every later text
    (the reference included) marked."""
    t = max(read_trajectories(str(TERMINAL_RUN)), key=lambda t: len(t.steps))
    assert len(t.steps) >= 5
    record = agentworldbench_record(t, len(t.steps))
    k = 3
    record["turn_idx"], record["current_prompt"] = k, record["prompt"][k - 1]
    record["prompt"][k:] = [f"{p} FUTURE-ACTION" for p in record["prompt"][k:]]
    record["response"][k - 1] += " REFERENCE"
    record["response"][k:] = [f"{r} FUTURE-OBSERVATION" for r in record["response"][k:]]
    return record


def test_the_judge_sees_the_models_context_and_the_reference_at_turn_idx(full_record: dict) -> None:
    reference = reference_observation(full_record)
    assert reference.endswith(" REFERENCE") and not reference.startswith("**Environment Observation:**")
    chat = judge_messages("terminal", record_messages(full_record), reference, "predicted", max_chars=100_000)
    user = chat[1]["content"]
    # The initial state comes from the record's own system prompt, the turns before turn_idx in order.
    assert full_record["system_str"] in user
    positions = [user.index(full_record[f][i]) for i in range(2) for f in ("prompt", "response")]
    assert positions == sorted(positions)
    assert user.index(full_record["current_prompt"]) > positions[-1]
    assert user.count("REFERENCE") == 1 and user.index("REFERENCE") > user.index("## Real observation")
    assert "FUTURE" not in user


def test_the_oldest_turns_leave_the_judges_chat_first() -> None:
    turns = [(f"### Turn {k}\n\n**Action:**\ncmd{k}", f"screen{k}:" + "x" * 100) for k in range(1, 5)]
    context = [
        {"role": "system", "content": "world model prompt"},
        *(
            {"role": r, "content": c}
            for turn in turns
            for r, c in zip(("user", "assistant"), turn, strict=True)
        ),
        {"role": "user", "content": "### Turn 5\n\n**Action:**\ncmd5"},
    ]
    # 150 characters a text, 300 for the earlier turns: the two latest (about 135 each) fit.
    user = judge_messages("terminal", context, "real", "predicted", max_chars=150)[1]["content"]
    assert "[2 older turns not shown]" in user and "cmd5" in user
    assert [f"screen{k}:" in user for k in range(1, 5)] == [False, False, True, True]
    first = judge_messages("terminal", [context[0], context[-1]], "real", "predicted")[1]["content"]
    assert "(none: this is the first action)" in first


def test_a_context_of_another_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="system, \\(user, assistant\\)\\*, user"):
        judge_messages("terminal", [{"role": "user", "content": "ls"}], "real", "predicted")


def test_reasoning_is_not_read_as_scores() -> None:
    scores = '{"format": 5, "factuality": 5, "consistency": 5, "realism": 5, "quality": 5}'
    assert parse_judge_reply(f"<think>maybe {scores}</think>")[0] is None
    # A reply cut inside its reasoning has no verdict, even if the reasoning drafted one.
    assert parse_judge_reply(f"<think>draft {scores}")[0] is None
    assert parse_judge_reply(f"<think>ok</think>{scores}")[0] == dict.fromkeys(
        ("format", "factuality", "consistency", "realism", "quality"), 5
    )


def test_the_aggregate_leaves_an_unscored_dimension_out_of_its_mean_only() -> None:
    """The public evaluation's aggregate: per dimension over the samples that scored it, the score over
    the samples' own means; a sample with no dimension scored counts in neither."""
    full = dict.fromkeys(DIMENSIONS, 50.0)
    partial = {"format": 100.0, "factuality": 0.0}
    assert sample_score(partial) == 50.0 and sample_score({}) is None
    summary = summarise([full, partial, {}])
    assert (summary["format"], summary["factuality"], summary["quality"]) == (75.0, 25.0, 50.0)
    assert summary["score"] == 50.0
    assert summarise([]) == {**dict.fromkeys(DIMENSIONS), "score": None}

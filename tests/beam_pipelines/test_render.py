from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schemas.records import Action, Observation, Step
from schemas.render import (
    AGENTWORLDBENCH_FIELDS,
    RecordError,
    action_turn_text,
    agentworldbench_record,
    chat_messages,
    cpt_document,
    extract_prediction,
    is_echo_turn,
    observation_turn_text,
    record_context,
    record_messages,
    reference_observation,
    split_chat,
    target_text,
)


def _step(action: Action, screen: str) -> Step:
    return Step(0, action, Observation("terminal_screen", screen), datetime(2024, 1, 1, tzinfo=UTC), 0.01)


def test_turn_markup():
    assert action_turn_text(3, Action("command", {"command": "ls"}, "ls")) == "### Turn 3\n\n**Action:**\nls"
    assert observation_turn_text(Observation("x", "out")) == "**Environment Observation:**\nout"


def test_agentworldbench_record_fields_and_layout(recorded):
    t = recorded[0]
    r = agentworldbench_record(t, 2)
    assert tuple(r) == AGENTWORLDBENCH_FIELDS
    assert (r["task"], r["turn_idx"], r["total_turns"]) == ("terminal", 2, len(t.steps))
    assert r["prompt"] == [action_turn_text(k, s.action) for k, s in enumerate(t.steps[:2], start=1)]
    assert r["response"][-1] == observation_turn_text(t.steps[1].observation)  # the reference
    assert r["current_prompt"] == r["prompt"][-1]
    assert t.initial_observation.text in r["system_str"] and "<predicted_observation>" in r["system_str"]


def test_chat_messages_follow_the_evaluation_layout(recorded):
    t = recorded[0]
    messages = chat_messages(t, 3)
    r = agentworldbench_record(t, 3)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in messages] == [
        r["system_str"],
        r["prompt"][0],
        r["response"][0],
        r["prompt"][1],
        r["response"][1],
        r["current_prompt"],
    ]


def test_oldest_turns_are_dropped_first_and_the_system_prompt_is_kept(recorded):
    t = max(recorded, key=lambda t: len(t.steps))
    n = len(t.steps)
    messages = chat_messages(t, n, fits=lambda m: len(m) <= 6)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"].startswith(f"### Turn {n - 2}\n")
    assert messages[-1]["content"].startswith(f"### Turn {n}\n")
    never = record_messages(agentworldbench_record(t, n), fits=lambda m: False)
    assert [m["role"] for m in never] == ["system", "user"]


def _at_turn(record: dict, turn_idx: int, current_prompt: str | None = None) -> dict:
    """`record`'s lists (which may run to the trajectory's end) read at another turn, as in a file that
    holds whole trajectories."""
    current = record["prompt"][turn_idx - 1] if current_prompt is None else current_prompt
    return {**record, "turn_idx": turn_idx, "current_prompt": current}


def test_records_are_read_at_turn_idx_and_nothing_later_reaches_the_model(recorded):
    t = max(recorded, key=lambda t: len(t.steps))
    n = len(t.steps)
    full = agentworldbench_record(t, n)  # prompt/response hold every turn
    for k in range(1, n):
        # Everything the model must not see, the reference response[k-1] included, carries a mark.
        record = _at_turn(full, k)
        record["prompt"] = [*full["prompt"][:k], *(f"{p} FUTURE" for p in full["prompt"][k:])]
        record["response"] = [*full["response"][: k - 1], *(f"{r} FUTURE" for r in full["response"][k - 1 :])]
        messages = record_messages(record)
        assert [m["content"] for m in messages] == [
            full["system_str"],
            *(
                text
                for pair in zip(full["prompt"][: k - 1], full["response"][: k - 1], strict=True)
                for text in pair
            ),
            full["prompt"][k - 1],
        ]
        assert not any("FUTURE" in m["content"] for m in messages)
        assert reference_observation(record) == f"{t.steps[k - 1].observation.text} FUTURE"
        # Truncation drops the oldest turns, never the current one, and never pulls a later one in.
        cut = record_messages(record, fits=lambda m: len(m) <= 4)
        assert cut[-1]["content"] == full["prompt"][k - 1] and len(cut) == min(4, 2 * k)
        assert not any("FUTURE" in m["content"] for m in cut)


def test_empty_current_prompt_means_the_prompt_at_turn_idx(recorded):
    full = agentworldbench_record(recorded[0], len(recorded[0].steps))
    record = _at_turn(full, 2, current_prompt="")
    history, action = record_context(record)
    assert action == full["prompt"][1] and history == [(full["prompt"][0], full["response"][0])]
    assert record_messages(record)[-1] == {"role": "user", "content": full["prompt"][1]}
    # A current_prompt given explicitly is what the model sees, as in the public files.
    assert record_messages(_at_turn(full, 2, "### Turn 2\n\nother"))[-1]["content"] == "### Turn 2\n\nother"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"turn_idx": 0}, "turn_idx 0 must lie in 1..total_turns"),
        ({"turn_idx": 9, "total_turns": 8}, "turn_idx 9 must lie in 1..total_turns"),
        ({"turn_idx": "2"}, "turn_idx must be an integer"),
        ({"turn_idx": 3, "prompt": ["a", "b"]}, "prompt must be a list of at least turn_idx=3 turns, has 2"),
        ({"turn_idx": 3, "response": ["a", "b"]}, "response must be a list of at least turn_idx=3"),
    ],
)
def test_a_turn_idx_past_the_lists_is_an_error(recorded, change, message):
    record = {**agentworldbench_record(recorded[0], 3), "total_turns": 8, **change}
    with pytest.raises(RecordError, match=message):
        record_messages(record)
    with pytest.raises(RecordError, match=message):
        reference_observation(record)


def test_split_chat_inverts_record_messages(recorded):
    record = agentworldbench_record(recorded[0], 3)
    history, action = record_context(record)
    assert split_chat(record_messages(record)) == (record["system_str"], history, action)
    assert split_chat([{"role": "user", "content": "x"}]) is None


def test_target_and_extraction_round_trip():
    obs = Observation("terminal_screen", "\n$ ls\nfile\n$")
    assert extract_prediction(target_text(obs)) == obs.text
    answer = "<think>maybe <predicted_observation>a</predicted_observation></think>" + target_text(obs, "ok")
    assert extract_prediction(answer) == obs.text
    assert (
        extract_prediction("<predicted_observation>one</predicted_observation> <predicted_observation>two")
        == "one"
    )
    assert extract_prediction("no tags") is None
    assert extract_prediction("<predicted_observation>unclosed") is None


def test_echo_turns():
    typed = Action(
        "keystrokes",
        {
            "keystrokes": [
                {"keystrokes": "sleep 30", "duration": 0.1},
                {"keystrokes": "Enter", "duration": 0.5},
            ]
        },
        "",
    )
    assert is_echo_turn(_step(typed, "agent@sandbox:~$ ls\nfile\nagent@sandbox:~$ sleep 30"))
    silent = Action("command", {"command": "true"}, "true")
    assert is_echo_turn(_step(silent, "agent@sandbox:~$ true\nagent@sandbox:~$"))
    cd = Action("command", {"command": "cd src"}, "cd src")
    assert not is_echo_turn(_step(cd, "agent@sandbox:~$ cd src\nagent@sandbox:~/src$"))
    ls = Action("command", {"command": "ls"}, "ls")
    assert not is_echo_turn(_step(ls, "agent@sandbox:~$ ls\nfile\nagent@sandbox:~$"))
    ctrl_c = Action("keystrokes", {"keystrokes": [{"keystrokes": "C-c", "duration": 0.5}]}, "C-c (0.5s)")
    assert not is_echo_turn(_step(ctrl_c, "agent@sandbox:~$ ^C\nagent@sandbox:~$"))


def test_cpt_document_holds_every_turn_in_order(recorded):
    t = recorded[0]
    doc = cpt_document(t)
    positions = [
        doc.index(f"{action_turn_text(k, s.action)}\n\n{observation_turn_text(s.observation)}")
        for k, s in enumerate(t.steps, start=1)
    ]
    assert positions == sorted(positions) and t.initial_observation.text in doc

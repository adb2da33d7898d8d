from __future__ import annotations

from datetime import UTC, datetime

from schemas.records import Action, Observation, Step
from schemas.render import (
    AGENTWORLDBENCH_FIELDS,
    action_turn_text,
    agentworldbench_record,
    chat_messages,
    cpt_document,
    extract_prediction,
    is_echo_turn,
    observation_turn_text,
    record_messages,
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

"""Android trajectories through the real corpus pipeline (FnApiRunner): `android_test.jsonl` comes out
in AgentWorldBench format with every action as its AndroidWorld JSON, the UI tree texts unchanged,
secrets redacted in every field the domain fills (typed text, node texts, the observation data), and
the screenshots (PNG attachments, which redaction cannot read) left out of every corpus. The records
are synthetic, in the observation contract's form (pure data): no emulator runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas.records import Action, Environment, Observation, Task, Trajectory
from tests.beam_pipelines.screen_corpus import (
    EMAIL,
    TOKEN,
    agentworldbench_records,
    assert_no_secret_or_screenshot,
    assert_screenshot_stored_once,
    build_test_corpus,
    holds_secret,
    read_jsonl,
    recorded_turns,
    rl_records,
    screen_observation,
    screen_trajectory,
)

PACKAGE = "com.android.contacts"
ACTIVITY = "com.android.contacts.activities.ContactEditorActivity"


def _screen(name: str, activity: str = ACTIVITY, error: str = "") -> str:
    head = f"Error: {error}\n" if error else ""
    return (
        f"{head}Package: {PACKAGE}  Activity: {activity}\n"
        '[0] android.widget.FrameLayout "" @(0,0,1080,2400)\n'
        '  [1] android.widget.TextView "Create contact" @(160,90,700,170)\n'
        f'  [2] android.widget.EditText "{name}" desc="First name" id={PACKAGE}:id/first @(60,300,1020,420)'
        " clickable,editable,focused\n"
        f'  [3] android.widget.Button "Save" id={PACKAGE}:id/save @(860,80,1040,180) clickable'
    )


def _observation(name: str, activity: str = ACTIVITY, error: str = "") -> Observation:
    data = {"package": PACKAGE, "activity": activity, "nodes": 4, "truncated": False, "error": error}
    return screen_observation("android_ui_tree", _screen(name, activity, error), data)


def _action(kind: str, **arguments: object) -> Action:
    """An action as the Android sandbox's parse_action writes it: its text the canonical JSON."""
    return Action(kind, dict(arguments), json.dumps({"action_type": kind, **arguments}, ensure_ascii=False))


def android_trajectory(i: int) -> Trajectory:
    """A contacts episode: a tap, typing (a token, by accident), an index not on the screen, saving
    (the saved contact's activity title holds an e-mail address)."""
    typed = f"Ana {i} {TOKEN}"
    steps = [
        (_action("click", index=2), _observation("")),
        (_action("input_text", text=typed, index=2), _observation(typed)),
        (_action("click", index=40), _observation(typed, error="no node with index 40 (indexes 0-3)")),
        (_action("click", x=950, y=130), _observation(typed, activity=f"QuickContactActivity {EMAIL}")),
        (_action("navigate_back"), _observation(typed)),
    ]
    return screen_trajectory(
        i,
        Environment("android", "fake", "", {"screenshot": True, "max_nodes": 300}),
        Task(id=f"contacts-add-{i}", instruction="Add a contact.", metadata={"apps": ["contacts"]}),
        steps,
        initial=_observation(""),
        explorer="android-explorer",
        collector="collectors.android",
        step_s=0.3,
    )


def test_formatter_writes_android_records_with_json_actions() -> None:
    t = android_trajectory(1)
    records = agentworldbench_records(t)
    assert [path for path, _ in records] == ["agentworldbench/android_test.jsonl"] * len(t.steps)
    last = records[-1][1]
    assert last["prompt"][0] == '### Turn 1\n\n**Action:**\n{"action_type": "click", "index": 2}'
    assert last["prompt"][4].endswith('**Action:**\n{"action_type": "navigate_back"}')
    assert last["response"][2] == f"**Environment Observation:**\n{t.steps[2].observation.text}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[Trajectory]]:
    return build_test_corpus(
        tmp_path_factory.mktemp("android_corpus"), [android_trajectory(i) for i in range(1, 4)]
    )


def _records(out: Path) -> list[dict]:
    return read_jsonl(out / "agentworldbench/android_test.jsonl")


def test_android_test_file_holds_every_turn_in_agentworldbench_format(corpus) -> None:
    out, stored = corpus
    records = _records(out)
    for record in records:
        assert "You are a world model of an Android phone" in record["system_str"]
        assert f"Package: {PACKAGE}  Activity: {ACTIVITY}" in record["system_str"]  # the initial state
        assert len(record["prompt"]) >= record["turn_idx"] and len(record["response"]) >= record["turn_idx"]
    for action, response, step in recorded_turns(records, stored, "android"):
        assert json.loads(action)["action_type"] == step.action.kind
        if not holds_secret(step):  # the tree and the action pass through as recorded
            assert action.endswith(step.action.text)
            assert response == f"**Environment Observation:**\n{step.observation.text}"


def test_secrets_are_redacted_in_actions_trees_and_data_and_screenshots_stay_out(corpus) -> None:
    out, stored = corpus
    assert_no_secret_or_screenshot(out)
    typed = next(r for r in _records(out) if r["turn_idx"] == 2)
    action = json.loads(typed["prompt"][1].split("**Action:**\n", 1)[1])
    assert action["action_type"] == "input_text" and "<REDACTED:github_token:" in action["text"]
    # The same placeholder in the action and in the edited field of the tree.
    placeholder = action["text"][action["text"].index("<REDACTED") : action["text"].index(">") + 1]
    assert f'android.widget.EditText "{action["text"]}"' in typed["response"][1]
    assert placeholder in typed["response"][1]
    rl = rl_records(out)
    assert rl and all(r["domain"] == "android" and r["reference_format"] == "android_ui_tree" for r in rl)
    saved = [r for r in rl if r["turn_idx"] == 4]
    assert saved and all("<REDACTED:email" in r["reference_data"]["activity"] for r in saved)
    assert all(
        "<REDACTED:github_token:" in r["action"]["arguments"]["text"] for r in rl if r["turn_idx"] == 2
    )
    assert_screenshot_stored_once(stored)

"""Android trajectories through the real corpus pipeline (FnApiRunner): `android_test.jsonl` comes out
in AgentWorldBench format with every action as its AndroidWorld JSON, the UI tree texts unchanged,
secrets redacted in every field the domain fills (typed text, node texts, the observation data), and
the screenshots (PNG attachments, which redaction cannot read) left out of every corpus. The records
are synthetic, in the observation contract's form (pure data): no emulator runs here."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from beam_pipelines.build_corpus import main
from beam_pipelines.stages.common import AGENTWORLDBENCH, CORPORA
from beam_pipelines.stages.format import Formatter
from schemas import read_trajectories
from schemas.records import (
    Action,
    Attachment,
    Environment,
    Observation,
    Outcome,
    Policy,
    Provenance,
    Step,
    Task,
    Trajectory,
)
from schemas.render import AGENTWORLDBENCH_FIELDS
from tests.beam_pipelines.conftest import write_dataset

T0 = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
EMAIL = "jane.doe@example.org"
PNG = b"\x89PNG\r\n\x1a\n" + b"SCREENSHOT-PIXELS"
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
    return Observation(
        "android_ui_tree",
        _screen(name, activity, error),
        data,
        [Attachment("screenshot.png", "image/png", content=PNG)],
    )


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
    return Trajectory(
        trajectory_id=f"android-{i:04d}",
        domain="android",
        environment=Environment("android", "fake", "", {"screenshot": True, "max_nodes": 300}),
        task=Task(id=f"contacts-add-{i}", instruction="Add a contact.", metadata={"apps": ["contacts"]}),
        policy=Policy("android-explorer", {"seed": i}),
        initial_observation=_observation(""),
        steps=[Step(k, a, o, T0 + timedelta(seconds=k), 0.3) for k, (a, o) in enumerate(steps)],
        outcome=Outcome("completed"),
        provenance=Provenance("collectors.android", "0.3.0", "test-host", T0, T0 + timedelta(seconds=9)),
    )


def test_formatter_writes_android_records_with_json_actions() -> None:
    t = android_trajectory(1)
    records = [
        o.value for o in Formatter(CORPORA, None, 32768, 1).format("test", t) if o.tag == AGENTWORLDBENCH
    ]
    assert [path for path, _ in records] == ["agentworldbench/android_test.jsonl"] * len(t.steps)
    last = records[-1][1]
    assert last["prompt"][0] == '### Turn 1\n\n**Action:**\n{"action_type": "click", "index": 2}'
    assert last["prompt"][4].endswith('**Action:**\n{"action_type": "navigate_back"}')
    assert last["response"][2] == f"**Environment Observation:**\n{t.steps[2].observation.text}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[Trajectory]]:
    root = tmp_path_factory.mktemp("android_corpus")
    trajectories = [android_trajectory(i) for i in range(1, 4)]
    raw = write_dataset(root / "raw", trajectories)
    stored = sorted(read_trajectories(str(raw)), key=lambda t: t.trajectory_id)
    args = ["--input", str(raw), "--output", str(root / "out"), "--split-ratios", "0,0,1", "--shards", "1"]
    assert main([*args, "--direct_num_workers=1", "--direct_running_mode=in_memory"]) == 0
    return root / "out", stored


def _records(out: Path) -> list[dict]:
    return [
        json.loads(line) for line in (out / "agentworldbench/android_test.jsonl").read_text().splitlines()
    ]


def test_android_test_file_holds_every_turn_in_agentworldbench_format(corpus) -> None:
    out, stored = corpus
    records = _records(out)
    assert len(records) == sum(len(t.steps) for t in stored)
    by_id = {t.trajectory_id: t for t in stored}
    for record in records:
        assert tuple(record) == AGENTWORLDBENCH_FIELDS and record["task"] == "android"
        assert "You are a world model of an Android phone" in record["system_str"]
        assert f"Package: {PACKAGE}  Activity: {ACTIVITY}" in record["system_str"]  # the initial state
        t = by_id[next(tid for tid in by_id if record["id"].startswith(tid))]
        k = record["turn_idx"]
        assert record["total_turns"] == len(t.steps)
        for turn, step in enumerate(t.steps[:k], start=1):
            action = json.loads(record["prompt"][turn - 1].split("**Action:**\n", 1)[1])
            assert action["action_type"] == step.action.kind
            secret = any(v in step.action.text + step.observation.text for v in (TOKEN, EMAIL))
            if not secret:  # the tree and the action pass through as recorded
                assert record["prompt"][turn - 1].endswith(step.action.text)
                assert (
                    record["response"][turn - 1] == f"**Environment Observation:**\n{step.observation.text}"
                )
        assert len(record["prompt"]) >= k and len(record["response"]) >= k


def test_secrets_are_redacted_in_actions_trees_and_data_and_screenshots_stay_out(corpus) -> None:
    out, stored = corpus
    texts = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert not any(TOKEN.encode() in body or EMAIL.encode() in body for body in texts.values())
    assert not any(b"SCREENSHOT-PIXELS" in body for body in texts.values())
    typed = next(r for r in _records(out) if r["turn_idx"] == 2)
    action = json.loads(typed["prompt"][1].split("**Action:**\n", 1)[1])
    assert action["action_type"] == "input_text" and "<REDACTED:github_token:" in action["text"]
    # The same placeholder in the action and in the edited field of the tree.
    placeholder = action["text"][action["text"].index("<REDACTED") : action["text"].index(">") + 1]
    assert f'android.widget.EditText "{action["text"]}"' in typed["response"][1]
    assert placeholder in typed["response"][1]
    rl = [
        json.loads(line) for p in sorted((out / "rl").rglob("*.jsonl")) for line in p.read_text().splitlines()
    ]
    assert rl and all(r["domain"] == "android" and r["reference_format"] == "android_ui_tree" for r in rl)
    saved = [r for r in rl if r["turn_idx"] == 4]
    assert saved and all("<REDACTED:email" in r["reference_data"]["activity"] for r in saved)
    assert all(
        "<REDACTED:github_token:" in r["action"]["arguments"]["text"] for r in rl if r["turn_idx"] == 2
    )
    attachments = {a.uri for t in stored for s in t.steps for a in s.observation.attachments}
    assert len(attachments) == 1 and next(iter(attachments)).startswith("attachments/sha256/")

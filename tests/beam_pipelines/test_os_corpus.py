"""Desktop (os) trajectories through the real corpus pipeline (FnApiRunner): `os_test.jsonl` comes out
in AgentWorldBench format with every action as its pyautogui code, the tree texts unchanged, secrets
redacted in every field the domain fills, and the screenshots (PNG attachments, which redaction
cannot read) left out of every corpus."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from beam_pipelines.build_corpus import main
from beam_pipelines.stages.common import AGENTWORLDBENCH, CORPORA
from beam_pipelines.stages.format import Formatter
from sandboxes.desktop import parse_action
from schemas import read_trajectories
from schemas.records import (
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
# Screenshot bytes: a PNG signature and a marker the corpus files must never hold.
PNG = b"\x89PNG\r\n\x1a\n" + b"SCREENSHOT-PIXELS"


def _screen(focused: str, editor_text: str, error: str = "") -> str:
    head = f"Error: {error}\n" if error else ""
    return (
        f"{head}Focused: {focused}\n"
        '[0] frame "Untitled 1 - Mousepad" states=active @(0,0 800x600)\n'
        '  [1] menu bar "" @(0,28 800x24)\n'
        '    [2] menu "File" @(0,28 40x24)\n'
        '    [3] menu "Edit" @(40,28 40x24)\n'
        f'  [4] text "" value="{editor_text}" states=editable,focused @(0,80 800x500)'
    )


def _observation(focused: str, editor_text: str, error: str = "") -> Observation:
    text = _screen(focused, editor_text, error)
    data = {"focused": focused, "nodes": 5, "truncated": False, "error": error, "backend": "local"}
    return Observation(
        "desktop_a11y_tree", text, data, [Attachment("screenshot.png", "image/png", content=PNG)]
    )


def os_trajectory(i: int) -> Trajectory:
    """An editor episode: a click, typing (a token, by accident), a save hotkey, a click on nothing;
    the actions as the desktop sandbox parses them (a computer action's text is its pyautogui code)."""
    focused = "mousepad — Untitled 1"
    typed = f"notes {i} {TOKEN}"
    steps = [
        (
            parse_action("computer", {"action": "click", "x": 400, "y": 330}),
            _observation(focused, ""),
        ),
        (
            parse_action("pyautogui", {"code": f"pyautogui.write({typed!r})"}),
            _observation(focused, typed),
        ),
        (
            parse_action("computer", {"action": "hotkey", "keys": ["ctrl", "s"]}),
            _observation(f"mousepad — Save As ({EMAIL})", typed),
        ),
        (
            parse_action("computer", {"action": "click", "x": 900, "y": 700}),
            _observation(focused, typed, "nothing at (900, 700): no window there, only the empty desktop"),
        ),
    ]
    return Trajectory(
        trajectory_id=f"os-{i:04d}",
        domain="os",
        environment=Environment("os", "local", "", {"screenshot": True, "max_nodes": 400}),
        task=Task(
            id=f"editor-type-{i}", instruction="Type a line in the editor.", metadata={"apps": ["editor"]}
        ),
        policy=Policy("desktop-explorer", {"seed": i}),
        initial_observation=_observation(focused, ""),
        steps=[Step(k, a, o, T0 + timedelta(seconds=k), 0.4) for k, (a, o) in enumerate(steps)],
        outcome=Outcome("completed"),
        provenance=Provenance("collectors.desktop", "0.3.0", "test-host", T0, T0 + timedelta(seconds=9)),
    )


def test_formatter_writes_os_records_with_pyautogui_actions() -> None:
    t = os_trajectory(1)
    records = [
        o.value for o in Formatter(CORPORA, None, 32768, 1).format("test", t) if o.tag == AGENTWORLDBENCH
    ]
    assert [path for path, _ in records] == ["agentworldbench/os_test.jsonl"] * len(t.steps)
    last = records[-1][1]
    assert last["prompt"][0] == "### Turn 1\n\n**Action:**\npyautogui.click(400, 330)"
    assert last["prompt"][2].endswith("**Action:**\npyautogui.hotkey('ctrl', 's')")
    assert last["response"][3] == f"**Environment Observation:**\n{t.steps[3].observation.text}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[Trajectory]]:
    root = tmp_path_factory.mktemp("os_corpus")
    trajectories = [os_trajectory(i) for i in range(1, 4)]
    raw = write_dataset(root / "raw", trajectories)
    stored = sorted(read_trajectories(str(raw)), key=lambda t: t.trajectory_id)
    args = ["--input", str(raw), "--output", str(root / "out"), "--split-ratios", "0,0,1", "--shards", "1"]
    assert main([*args, "--direct_num_workers=1", "--direct_running_mode=in_memory"]) == 0
    return root / "out", stored


def test_os_test_file_holds_every_turn_in_agentworldbench_format(corpus) -> None:
    out, stored = corpus
    records = [json.loads(line) for line in (out / "agentworldbench/os_test.jsonl").read_text().splitlines()]
    assert len(records) == sum(len(t.steps) for t in stored)
    by_id = {t.trajectory_id: t for t in stored}
    for record in records:
        assert tuple(record) == AGENTWORLDBENCH_FIELDS and record["task"] == "os"
        assert "You are a world model of a Linux desktop" in record["system_str"]
        assert "Focused: mousepad — Untitled 1" in record["system_str"]  # the initial state
        t = by_id[next(tid for tid in by_id if record["id"].startswith(tid))]
        k = record["turn_idx"]
        assert record["total_turns"] == len(t.steps)
        for turn, step in enumerate(t.steps[:k], start=1):
            action = record["prompt"][turn - 1].split("**Action:**\n", 1)[1]
            assert action.startswith("pyautogui.")
            secret = any(v in step.action.text + step.observation.text for v in (TOKEN, EMAIL))
            if not secret:  # the tree and the action pass through as recorded
                assert action == step.action.text
                assert (
                    record["response"][turn - 1] == f"**Environment Observation:**\n{step.observation.text}"
                )


def test_secrets_are_redacted_in_actions_trees_and_data_and_screenshots_stay_out(corpus) -> None:
    out, stored = corpus
    texts = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert not any(TOKEN.encode() in body or EMAIL.encode() in body for body in texts.values())
    assert not any(b"SCREENSHOT-PIXELS" in body for body in texts.values())
    records = [json.loads(line) for line in (out / "agentworldbench/os_test.jsonl").read_text().splitlines()]
    typed = next(r for r in records if r["turn_idx"] == 2)
    action = typed["prompt"][1].split("**Action:**\n", 1)[1]
    assert action.startswith("pyautogui.write('notes ") and "<REDACTED:github_token:" in action
    # The same placeholder in the action and in the editor's value of the tree.
    placeholder = action[action.index("<REDACTED") : action.index(">") + 1]
    number = int(typed["id"].split(":")[0].removeprefix("os-"))
    assert f'value="notes {number} {placeholder}"' in typed["response"][1]
    rl = [
        json.loads(line) for p in sorted((out / "rl").rglob("*.jsonl")) for line in p.read_text().splitlines()
    ]
    assert rl and all(r["domain"] == "os" and r["reference_format"] == "desktop_a11y_tree" for r in rl)
    save_as = [r for r in rl if r["turn_idx"] == 3]
    assert save_as and all("<REDACTED:email" in r["reference_data"]["focused"] for r in save_as)
    typed_rl = [r for r in rl if r["turn_idx"] == 2]
    assert all("<REDACTED:github_token:" in r["action"]["arguments"]["code"] for r in typed_rl)
    # The raw dataset keeps each screenshot once, by content hash, as the schema stores attachments.
    attachments = {a.uri for t in stored for s in t.steps for a in s.observation.attachments}
    assert len(attachments) == 1 and next(iter(attachments)).startswith("attachments/sha256/")

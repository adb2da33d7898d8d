"""Desktop (os) trajectories through the real corpus pipeline (FnApiRunner): `os_test.jsonl` comes out
in AgentWorldBench format with every action as its pyautogui code, the tree texts unchanged, secrets
redacted in every field the domain fills, and the screenshots (PNG attachments, which redaction
cannot read) left out of every corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxes.desktop import parse_action
from schemas.records import Environment, Observation, Task, Trajectory
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
    return screen_observation("desktop_a11y_tree", text, data)


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
    return screen_trajectory(
        i,
        Environment("os", "local", "", {"screenshot": True, "max_nodes": 400}),
        Task(id=f"editor-type-{i}", instruction="Type a line in the editor.", metadata={"apps": ["editor"]}),
        steps,
        initial=_observation(focused, ""),
        explorer="desktop-explorer",
        collector="collectors.desktop",
        step_s=0.4,
    )


def test_formatter_writes_os_records_with_pyautogui_actions() -> None:
    t = os_trajectory(1)
    records = agentworldbench_records(t)
    assert [path for path, _ in records] == ["agentworldbench/os_test.jsonl"] * len(t.steps)
    last = records[-1][1]
    assert last["prompt"][0] == "### Turn 1\n\n**Action:**\npyautogui.click(400, 330)"
    assert last["prompt"][2].endswith("**Action:**\npyautogui.hotkey('ctrl', 's')")
    assert last["response"][3] == f"**Environment Observation:**\n{t.steps[3].observation.text}"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, list[Trajectory]]:
    return build_test_corpus(tmp_path_factory.mktemp("os_corpus"), [os_trajectory(i) for i in range(1, 4)])


def test_os_test_file_holds_every_turn_in_agentworldbench_format(corpus) -> None:
    out, stored = corpus
    records = read_jsonl(out / "agentworldbench/os_test.jsonl")
    for record in records:
        assert "You are a world model of a Linux desktop" in record["system_str"]
        assert "Focused: mousepad — Untitled 1" in record["system_str"]  # the initial state
    for action, response, step in recorded_turns(records, stored, "os"):
        assert action.startswith("pyautogui.")
        if not holds_secret(step):  # the tree and the action pass through as recorded
            assert action == step.action.text
            assert response == f"**Environment Observation:**\n{step.observation.text}"


def test_secrets_are_redacted_in_actions_trees_and_data_and_screenshots_stay_out(corpus) -> None:
    out, stored = corpus
    assert_no_secret_or_screenshot(out)
    records = read_jsonl(out / "agentworldbench/os_test.jsonl")
    typed = next(r for r in records if r["turn_idx"] == 2)
    action = typed["prompt"][1].split("**Action:**\n", 1)[1]
    assert action.startswith("pyautogui.write('notes ") and "<REDACTED:github_token:" in action
    # The same placeholder in the action and in the editor's value of the tree.
    placeholder = action[action.index("<REDACTED") : action.index(">") + 1]
    number = int(typed["id"].split(":")[0].removeprefix("os-"))
    assert f'value="notes {number} {placeholder}"' in typed["response"][1]
    rl = rl_records(out)
    assert rl and all(r["domain"] == "os" and r["reference_format"] == "desktop_a11y_tree" for r in rl)
    save_as = [r for r in rl if r["turn_idx"] == 3]
    assert save_as and all("<REDACTED:email" in r["reference_data"]["focused"] for r in save_as)
    typed_rl = [r for r in rl if r["turn_idx"] == 2]
    assert all("<REDACTED:github_token:" in r["action"]["arguments"]["code"] for r in typed_rl)
    assert_screenshot_stored_once(stored)

"""The desktop (os) domain in the simulator and the fidelity metrics: the tree text read back, the
tree-aware metrics (node F1 without ids and positions, a position tolerance), the format verifier,
and a simulated desktop over a real local HTTP chat server."""

from __future__ import annotations

import re

import pytest

from sandboxes.base import InvalidActionError
from sandboxes.checks import check_sandbox
from schemas.records import Action, Observation, Task
from tests.training.test_backends import scripted_chat_server
from training.backends.openai_http import OpenAIBackend
from training.fidelity.desktop import desktop_scores, position_share
from training.observations.parsers import observation_data
from training.observations.trees import desktop_data
from training.simulator import SimulatedSandbox

CALCULATOR = """Focused: gnome-calculator — Calculator
[0] frame "Calculator" states=active @(0,0 360x616)
  [1] text "" value="7+6" states=editable,focused @(12,60 336x40)
  [2] push button "7" @(12,300 80x50)
  [3] push button "+" @(268,420 80x50)
  [4] push button "=" @(268,480 80x50)
[... 31 more nodes not shown]"""

# The same screen with one extra node first (so every id after it moves) and windows 3 px lower.
RENUMBERED = """Focused: gnome-calculator — Calculator
[0] frame "Calculator" states=active @(0,3 360x616)
  [1] label "Basic" @(140,10 80x20)
  [2] text "" value="7+6" states=editable,focused @(12,63 336x40)
  [3] push button "7" @(12,303 80x50)
  [4] push button "+" @(268,423 80x50)
  [5] push button "=" @(268,483 80x50)
[... 31 more nodes not shown]"""


def test_desktop_data_is_read_from_the_text() -> None:
    assert desktop_data(CALCULATOR) == {
        "focused": "gnome-calculator — Calculator",
        "nodes": 36,
        "truncated": True,
        "error": "",
    }
    failed = "Error: nothing at (900, 700): no window there, only the empty desktop\nFocused: none"
    assert observation_data("os", failed) == {
        "focused": "none",
        "nodes": 0,
        "truncated": False,
        "error": "nothing at (900, 700): no window there, only the empty desktop",
    }


def test_node_f1_ignores_ids_and_positions_but_not_values_or_states() -> None:
    moved = desktop_scores(RENUMBERED, CALCULATOR)
    assert moved["node_f1"] == pytest.approx(2 * (5 / 6) / (5 / 6 + 1))  # one extra node, nothing missing
    assert moved["position_within_tolerance"] == 1.0 and moved["focused_match"] == 1.0
    shown = CALCULATOR.replace('value="7+6"', 'value="13"')
    assert desktop_scores(shown, CALCULATOR)["node_f1"] == pytest.approx(0.8)
    unfocused = CALCULATOR.replace("states=editable,focused", "states=editable")
    scores = desktop_scores(unfocused, CALCULATOR)
    assert scores["node_f1"] == 1.0 and scores["node_state_f1"] == pytest.approx(0.8)
    other = desktop_scores(
        CALCULATOR.replace("gnome-calculator — Calculator", "mousepad — Untitled 1"), CALCULATOR
    )
    assert other["focused_match"] == 0.0


def test_position_tolerance_counts_nodes_placed_within_the_pixels() -> None:
    from sandboxes.desktop.tree_text import parse_tree

    real = parse_tree(CALCULATOR)
    far = parse_tree(re.sub(r"@\((\d+),", lambda m: f"@({int(m.group(1)) + 20},", CALCULATOR))
    assert position_share(far, real) == 0.0
    assert position_share(far, real, tolerance=20) == 1.0
    # A prediction without the "=" button: that real node counts as not placed.
    missing = parse_tree("\n".join(line for line in CALCULATOR.split("\n") if '"="' not in line))
    assert position_share(missing, real) == pytest.approx(0.8)
    assert position_share(real, parse_tree("Focused: none")) is None


def _desktop_world(messages: list[dict]) -> str:
    """A calculator world model: `=` shows 13 in the display, anything else changes nothing."""
    action = messages[-1]["content"].split("**Action:**\n", 1)[1]
    screen = CALCULATOR.replace('value="7+6"', 'value="13"') if "x=308, y=505" in action else CALCULATOR
    thought = f"<think>\nThe agent ran {action}.\n</think>\n"
    return f"{thought}<predicted_observation>\n{screen}\n</predicted_observation>"


def test_simulated_desktop_steps_and_reads_the_tree() -> None:
    task = Task(
        id="calc",
        instruction="Compute 7 + 6.",
        metadata={
            "apps": ["calculator"],
            "initial_observation": {"format": "desktop_a11y_tree", "text": CALCULATOR},
        },
    )
    press = Action("pyautogui", {"code": "pyautogui.click(x=308, y=505)"}, "pyautogui.click(x=308, y=505)")
    with scripted_chat_server(_desktop_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url), domain="os")
        check_sandbox(sim, task, [press])
        first = sim.reset(task)
        assert first.text == CALCULATOR
        result = sim.step(press)
        assert result.info["format_failure"] is False
        assert result.observation.format == first.format == "desktop_a11y_tree"
        assert 'value="13"' in result.observation.text
        assert result.observation.data["focused"] == "gnome-calculator — Calculator"
        assert result.observation.data["nodes"] == 36 and result.observation.data["truncated"] is True
        # The model saw the action as its pyautogui code, and the OS wording in the system prompt.
        sent = server.requests[-1]["messages"]
        assert sent[-1]["content"].endswith("**Action:**\npyautogui.click(x=308, y=505)")
        assert "Focused: <application> — <window title>" in sent[0]["content"]
        # Actions are the desktop sandbox's: a computer action is validated and written as its code.
        sim.step(Action("computer", {"action": "hotkey", "keys": ["ctrl", "z"]}, ""))
        assert server.requests[-1]["messages"][-1]["content"].endswith("pyautogui.hotkey('ctrl', 'z')")
        with pytest.raises(InvalidActionError):
            sim.step(Action("computer", {"action": "click", "x": 5}, ""))
        sim.close()


def test_observation_format_of_a_recording_round_trips() -> None:
    observation = Observation("desktop_a11y_tree", CALCULATOR, desktop_data(CALCULATOR))
    assert desktop_data(observation.text) == observation.data

"""The Android domain in the simulator and the fidelity metrics: the UI tree text read back, the
tree-aware metrics (node F1 without indexes and bounds, a position tolerance, package, activity and
error), the format verifier, and a simulated phone over a real local HTTP chat server."""

from __future__ import annotations

import json

import pytest

from sandboxes.android.tree_text import parse_tree
from sandboxes.checks import check_sandbox
from schemas.records import Action, Observation, Task
from tests.training.test_backends import scripted_chat_server
from training.backends.openai_http import OpenAIBackend
from training.fidelity.android import android_scores, position_share
from training.observations.parsers import observation_data
from training.observations.trees import android_data
from training.rewards.verifiers import format_valid
from training.simulator import SimulatedSandbox

CLOCK = """Package: com.google.android.deskclock  Activity: com.android.deskclock.DeskClock
[0] android.widget.FrameLayout "" @(0,0,1080,2400)
  [1] android.widget.TextView "Alarm" desc="Alarm" id=com.google.android.deskclock:id/tab_alarm @(0,2200,270,2400) clickable,selected
  [2] android.widget.TextView "Clock" desc="Clock" @(270,2200,540,2400) clickable
  [3] androidx.recyclerview.widget.RecyclerView "" id=com.google.android.deskclock:id/alarm_recycler_view @(0,200,1080,2200) scrollable
    [4] android.widget.TextView "7:00 AM" @(40,240,600,360) clickable,long-clickable
    [5] android.widget.Switch "" desc="7:00 AM alarm" @(900,260,1040,340) clickable,checked
  [6] android.widget.ImageButton "" desc="Add alarm" id=com.google.android.deskclock:id/fab @(470,1900,610,2040) clickable
[... 12 more nodes not shown]"""  # noqa: E501

# The same screen with one extra node first (so every index after it moves) and the list 6 px lower.
RENUMBERED = """Package: com.google.android.deskclock  Activity: com.android.deskclock.DeskClock
[0] android.widget.FrameLayout "" @(0,0,1080,2400)
  [1] android.widget.TextView "Alarms" @(40,100,400,180)
  [2] android.widget.TextView "Alarm" desc="Alarm" id=com.google.android.deskclock:id/tab_alarm @(0,2200,270,2400) clickable,selected
  [3] android.widget.TextView "Clock" desc="Clock" @(270,2200,540,2400) clickable
  [4] androidx.recyclerview.widget.RecyclerView "" id=com.google.android.deskclock:id/alarm_recycler_view @(0,206,1080,2206) scrollable
    [5] android.widget.TextView "7:00 AM" @(40,246,600,366) clickable,long-clickable
    [6] android.widget.Switch "" desc="7:00 AM alarm" @(900,266,1040,346) clickable,checked
  [7] android.widget.ImageButton "" desc="Add alarm" id=com.google.android.deskclock:id/fab @(470,1900,610,2040) clickable
[... 12 more nodes not shown]"""  # noqa: E501


def test_android_data_is_read_from_the_text() -> None:
    assert android_data(CLOCK) == {
        "package": "com.google.android.deskclock",
        "activity": "com.android.deskclock.DeskClock",
        "nodes": 19,
        "truncated": True,
        "error": "",
    }
    failed = "Error: no node with index 40 on this screen (indexes 0-6)\nPackage: unknown  Activity: unknown"
    assert observation_data("android", failed) == {
        "package": "unknown",
        "activity": "unknown",
        "nodes": 0,
        "truncated": False,
        "error": "no node with index 40 on this screen (indexes 0-6)",
    }
    tree = parse_tree(CLOCK)
    switch = tree.node(5)
    assert switch is not None and switch.desc == "7:00 AM alarm" and switch.flags == {"clickable", "checked"}
    assert switch.centre == (970, 300) and tree.node_at(970, 300) == switch


def test_node_f1_ignores_indexes_and_bounds_but_not_texts_or_flags() -> None:
    moved = android_scores(RENUMBERED, CLOCK)
    assert moved["node_f1"] == pytest.approx(2 * (7 / 8) / (7 / 8 + 1))  # one extra node, nothing missing
    assert moved["position_within_tolerance"] == 1.0 and moved["package_match"] == 1.0
    later = CLOCK.replace('"7:00 AM" @', '"7:30 AM" @')
    assert android_scores(later, CLOCK)["node_f1"] == pytest.approx(6 / 7)
    unchecked = CLOCK.replace("clickable,checked", "clickable")
    scores = android_scores(unchecked, CLOCK)
    assert scores["node_f1"] == 1.0 and scores["node_flag_f1"] == pytest.approx(6 / 7)
    other = android_scores(CLOCK.replace("Activity: com.android.deskclock.DeskClock", "Activity: x.Y"), CLOCK)
    assert other["activity_match"] == 0.0 and other["package_match"] == 1.0


def test_position_tolerance_counts_nodes_placed_within_the_pixels() -> None:
    real = parse_tree(CLOCK)
    shifted = parse_tree(CLOCK.replace("@(40,240,600,360)", "@(40,280,600,400)"))
    assert position_share(shifted, real) == pytest.approx(6 / 7)
    assert position_share(shifted, real, tolerance=40) == 1.0
    missing = parse_tree("\n".join(line for line in CLOCK.split("\n") if "Add alarm" not in line))
    assert position_share(missing, real) == pytest.approx(6 / 7)
    assert position_share(real, parse_tree("Package: unknown  Activity: unknown")) is None


def test_format_verifier_keeps_the_tree_rule_for_xml_hierarchies() -> None:
    # A page source is not this sandbox's form, but it is a tree: the nesting rule still holds.
    assert format_valid("android", "<hierarchy><node/></hierarchy>", "<hierarchy/>")


def _phone_world(messages: list[dict]) -> str:
    """A clock world model: tapping the alarm switch unchecks it, anything else changes nothing."""
    action = json.loads(messages[-1]["content"].split("**Action:**\n", 1)[1])
    screen = CLOCK.replace("clickable,checked", "clickable") if action.get("index") == 5 else CLOCK
    thought = f"<think>\nThe agent sent {action}.\n</think>\n"
    return f"{thought}<predicted_observation>\n{screen}\n</predicted_observation>"


def test_simulated_phone_steps_and_reads_the_tree() -> None:
    task = Task(
        id="clock-alarm-off",
        instruction="Turn the 7:00 AM alarm off.",
        metadata={"apps": ["clock"], "initial_observation": {"format": "android_ui_tree", "text": CLOCK}},
    )
    tap = Action("click", {"index": 5}, json.dumps({"action_type": "click", "index": 5}))
    with scripted_chat_server(_phone_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url), domain="android")
        check_sandbox(sim, task, [tap])
        first = sim.reset(task)
        assert first.text == CLOCK and first.format == "android_ui_tree"
        result = sim.step(tap)
        assert result.info["format_failure"] is False
        assert result.observation.format == "android_ui_tree"
        assert "clickable,checked" not in result.observation.text
        data = result.observation.data
        assert data["package"] == "com.google.android.deskclock" and data["nodes"] == 19 and data["truncated"]
        sent = server.requests[-1]["messages"]
        assert json.loads(sent[-1]["content"].split("**Action:**\n", 1)[1]) == {
            "action_type": "click",
            "index": 5,
        }
        assert "Package: <package>  Activity: <activity>" in sent[0]["content"]
        sim.close()


def test_observation_format_of_a_recording_round_trips() -> None:
    observation = Observation("android_ui_tree", CLOCK, android_data(CLOCK))
    assert android_data(observation.text) == observation.data

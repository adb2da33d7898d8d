"""The Android explorer on tree texts in the sandbox's form, through the real Android parse_action:
seeded determinism, taps on clickable nodes (by index or at their centre), typing into editable
nodes, scrolls inside scrollable ones, going back when the walk left the task's apps, and a share
of deliberate errors (the parser's refusals recorded as invalid actions)."""

from __future__ import annotations

import json
import random
from collections import Counter

from collectors.android.explorer import AndroidExplorer
from sandboxes.android.actions import parse_action
from sandboxes.android.tree_text import parse_tree
from schemas.invalid_actions import INVALID
from schemas.records import Observation, Task

SETTINGS = """Package: com.android.settings  Activity: com.android.settings.Settings
[0] android.widget.FrameLayout "" id=android:id/content @(0,0,1080,2400)
  [1] android.widget.EditText "" desc="Search settings" id=com.android.settings:id/search @(40,160,1040,280) clickable,editable
  [2] androidx.recyclerview.widget.RecyclerView "" id=com.android.settings:id/recycler_view @(0,300,1080,2400) scrollable
    [3] android.widget.LinearLayout "" @(0,300,1080,500) clickable
      [4] android.widget.TextView "Network & internet" @(180,330,900,400)
    [5] android.widget.LinearLayout "" @(0,500,1080,700) clickable,long-clickable
      [6] android.widget.TextView "Connected devices" @(180,530,900,600)
    [7] android.widget.Switch "" desc="Dark theme" @(900,720,1040,800) clickable,checked
    [8] android.widget.Button "Reset" @(40,820,300,900) clickable,disabled"""  # noqa: E501

LAUNCHER = """Package: com.google.android.apps.nexuslauncher  Activity: unknown
[0] android.widget.FrameLayout "" @(0,0,1080,2400)
  [1] android.widget.TextView "Phone" desc="Phone" @(60,2000,260,2200) clickable"""

TASK = Task(id="settings-explore", instruction="Look around Settings.", metadata={"apps": ["settings"]})


def _walk(seed: int, screen: str, steps: int = 60, **options: float) -> list:
    explorer = AndroidExplorer(parse_action, end_probability=0.0, **options)
    observation = Observation("android_ui_tree", screen, {})
    explorer.reset(TASK, observation, random.Random(seed))
    return [explorer.act(observation) for _ in range(steps)]


def test_same_seed_same_walk_other_seed_other_walk() -> None:
    first = [a.text for a in _walk(7, SETTINGS)]
    assert first == [a.text for a in _walk(7, SETTINGS)]
    assert first != [a.text for a in _walk(8, SETTINGS)]


def test_valid_moves_target_what_the_screen_offers() -> None:
    tree = parse_tree(SETTINGS)
    actions = _walk(1, SETTINGS, steps=400, invalid_probability=0.0)
    assert all(a.kind != INVALID for a in actions)
    kinds = Counter(a.kind for a in actions)
    assert kinds["click"] > kinds["input_text"] > 0 and kinds["scroll"] > 0 and kinds["navigate_back"] > 0
    for action in actions:
        assert json.loads(action.text)["action_type"] == action.kind  # the canonical JSON
        index = action.arguments.get("index")
        node = tree.node(index) if index is not None else None
        if action.kind == "click" and node is not None:
            assert "clickable" in node.flags and "disabled" not in node.flags and "editable" not in node.flags
        if action.kind == "click" and node is None:  # by coordinates: the centre of a clickable node
            hit = tree.node_at(action.arguments["x"], action.arguments["y"])
            assert hit is not None and hit.centre == (action.arguments["x"], action.arguments["y"])
        if action.kind == "long_press" and node is not None:
            assert "long-clickable" in node.flags
        if action.kind == "input_text":
            assert node is not None and "editable" in node.flags and action.arguments["text"]
        if action.kind == "scroll" and node is not None:
            assert "scrollable" in node.flags
    assert all(a.arguments.get("index") != 8 for a in actions), "a disabled button is never tapped"
    # Typing is followed by Enter now and then, as a search is submitted.
    after_typing = [b.kind for a, b in zip(actions, actions[1:], strict=False) if a.kind == "input_text"]
    assert "keyboard_enter" in after_typing
    # Going home comes back to the task's app.
    home = [i for i, a in enumerate(actions[:-1]) if a.kind == "navigate_home"]
    assert home and all(actions[i + 1].arguments == {"app_name": "Settings"} for i in home)


def test_a_walk_outside_the_tasks_apps_goes_back_or_reopens_the_app() -> None:
    actions = _walk(3, LAUNCHER, steps=300, invalid_probability=0.0)
    kinds = Counter(a.kind for a in actions)
    home_moves = kinds["navigate_back"] + kinds["open_app"]
    inside = Counter(a.kind for a in _walk(3, SETTINGS, steps=300, invalid_probability=0.0))
    assert home_moves > 2 * (inside["navigate_back"] + inside["open_app"])


def test_deliberate_errors_are_a_share_and_say_why() -> None:
    actions = _walk(5, SETTINGS, steps=400, invalid_probability=0.3)
    refused = [a for a in actions if a.kind == INVALID]
    wrong_index = [a for a in actions if a.kind == "click" and a.arguments.get("index", 0) > 8]
    off_screen = [a for a in actions if a.kind == "click" and a.arguments.get("x", 0) > 1080]
    missing_app = [a for a in actions if a.kind == "open_app" and a.arguments["app_name"] != "Settings"]
    assert refused and wrong_index and off_screen and missing_app
    assert 0.15 < (len(refused) + len(wrong_index) + len(off_screen) + len(missing_app)) / len(actions) < 0.45
    for action in refused:  # the parser's reason, and the JSON the agent wrote
        assert action.arguments["error"] and json.loads(action.text)["action_type"] in (
            "scroll",
            "input_text",
        )
    assert any("direction" in a.arguments["error"] for a in refused)
    assert any("text" in a.arguments["error"] for a in refused)


def test_an_action_that_never_ran_keeps_exploring_the_last_screen() -> None:
    explorer = AndroidExplorer(parse_action, end_probability=0.0, invalid_probability=0.0)
    explorer.reset(TASK, Observation("android_ui_tree", SETTINGS, {}), random.Random(2))
    runner_text = Observation("text", "invalid action: scroll: 'direction' must be one of ...", {})
    actions = [explorer.act(runner_text) for _ in range(30)]
    assert any(a.arguments.get("index") in (1, 3, 5, 7) for a in actions)


def test_walks_end() -> None:
    explorer = AndroidExplorer(parse_action, end_probability=0.5, min_steps=2)
    observation = Observation("android_ui_tree", SETTINGS, {})
    lengths = []
    for seed in range(20):
        explorer.reset(TASK, observation, random.Random(seed))
        n = 0
        while explorer.act(observation) is not None:
            n += 1
        lengths.append(n)
    assert min(lengths) >= 2 and max(lengths) < 40

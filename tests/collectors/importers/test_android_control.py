"""AndroidControl episodes through the real CLI: JSON Lines with the release's field names
(https://github.com/google-research/google-research/tree/master/android_control), each
accessibility forest as JSON of the android_env protos (one episode in the proto's snake_case, one
in protobuf JSON's lowerCamelCase, given as JSON text), rendered into our Android tree text,
validated and written; a bad episode to the dead-letter file; a rerun resumes. Then the real ADP
sample (flat android_world element lists per screen), read from ../shared/public-samples."""

from __future__ import annotations

import json
import re
from pathlib import Path

from collectors.importers.__main__ import main
from schemas import read_trajectories

SETTINGS = "com.android.settings"


def _node(
    uid: int, cls: str, bounds: tuple[int, int, int, int], children: tuple[int, ...] = (), **extra
) -> dict:
    left, top, right, bottom = bounds
    node = {
        "unique_id": uid,
        "bounds_in_screen": {"left": left, "top": top, "right": right, "bottom": bottom},
        "class_name": cls,
        "package_name": extra.pop("package_name", SETTINGS),
        "child_ids": list(children),
        "is_enabled": True,
        "is_visible_to_user": True,
        **extra,
    }
    return node


def _forest(*windows: tuple[str, bool, list[dict]]) -> dict:
    return {
        "windows": [
            {"id": i, "layer": i, "window_type": kind, "is_active": active, "tree": {"nodes": nodes}}
            for i, (kind, active, nodes) in enumerate(windows)
        ]
    }


STATUS_BAR = ("TYPE_SYSTEM", False, [_node(90, "android.widget.FrameLayout", (0, 0, 1080, 60), (91,),
    package_name="com.android.systemui"), _node(91, "android.widget.TextView", (20, 0, 200, 60), text="9:41",
    package_name="com.android.systemui")])  # fmt: skip


def _settings_page(title: str, *rest: dict) -> dict:
    """The status bar over an active Settings window: a full-screen frame (children 2 and 3) holding
    the page title (node 2), then `rest`."""
    frame = _node(1, "android.widget.FrameLayout", (0, 0, 1080, 2400), (2, 3))
    heading = _node(2, "android.widget.TextView", (40, 100, 1040, 200), text=title)
    return _forest(STATUS_BAR, ("TYPE_APPLICATION", True, [frame, heading, *rest]))


HOME = _settings_page(
    "Settings",
    _node(
        3,
        "android.widget.LinearLayout",
        (0, 300, 1080, 450),
        (4,),
        is_clickable=True,
        view_id_resource_name="com.android.settings:id/dashboard_tile",
    ),  # fmt: skip
    _node(4, "android.widget.TextView", (40, 320, 1040, 430), text="Network & internet"),
    _node(5, "android.widget.TextView", (0, 0, 10, 10), text="offscreen", is_visible_to_user=False),
)
NETWORK = _settings_page(
    "Network & internet",
    _node(
        3,
        "android.widget.Switch",
        (900, 300, 1040, 400),
        is_clickable=True,
        is_checked=True,
        content_description="Wi-Fi",
    ),  # fmt: skip
)
SEARCH = _forest(
    (
        "TYPE_APPLICATION",
        True,
        [
            _node(1, "android.widget.FrameLayout", (0, 0, 1080, 2400), (2,)),
            _node(
                2,
                "android.widget.EditText",
                (40, 100, 1040, 200),
                is_clickable=True,
                is_editable=True,
                is_focused=True,
            ),  # fmt: skip
        ],
    ),
)


def _camel(value):
    """The forest as protobuf's MessageToJson writes it: lowerCamelCase names, false and 0 left out."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if item is False or (item == 0 and not isinstance(item, bool)):
                continue
            out[re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)] = _camel(item)
        return out
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def _episode(episode_id: int, goal: str, forests: list, actions: list[dict], steps: list[str]) -> dict:
    return {
        "episode_id": episode_id,
        "goal": goal,
        "screenshot_widths": [1080] * len(forests),
        "screenshot_heights": [2400] * len(forests),
        "accessibility_trees": forests,
        "actions": [json.dumps(a) for a in actions],  # the release keeps each action as JSON text
        "step_instructions": steps,
    }


def write_sample(directory: Path) -> Path:
    """Three AndroidControl episodes as JSON Lines: two good, one with an action type it lacks."""
    wifi = _episode(
        1001,
        "Turn off Wi-Fi in the settings",
        [HOME, NETWORK, NETWORK, HOME],
        [
            {"action_type": "click", "x": 540, "y": 375},
            {"action_type": "scroll", "direction": "down"},
            {"action_type": "navigate_back"},
        ],
        ["Open Network & internet", "Scroll down", "Go back"],
    )
    search = _episode(
        1002,
        "Search settings for battery",
        [json.dumps(_camel(HOME)), json.dumps(_camel(SEARCH)), json.dumps(_camel(SEARCH))],
        [
            {"action_type": "open_app", "app_name": "Settings"},
            {"action_type": "type", "x": 500, "y": 150, "text": "battery"},
        ],
        ["Open the Settings app", "Type battery in the search field"],
    )
    odd = _episode(1003, "Shake the phone", [HOME, HOME], [{"action_type": "shake"}], ["Shake it"])
    path = directory / "android_control_test.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in (wifi, search, odd)))
    return path


def test_episodes_import_as_android_trajectories_and_resume(tmp_path: Path, capsys) -> None:
    source, out = write_sample(tmp_path), tmp_path / "out"
    assert main(["android_control", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    assert "imported 2 of 3 rows" in capsys.readouterr().out
    found = {t.task.id: t for t in read_trajectories(out, validate=True)}
    assert set(found) == {"1001", "1002"}

    wifi = found["1001"]
    assert wifi.domain == "android" and wifi.outcome.status == "completed"
    assert wifi.environment.config == {"screen_width": 1080, "screen_height": 2400}
    assert [s.action.text for s in wifi.steps] == [
        '{"action_type": "click", "x": 540, "y": 375}',
        '{"action_type": "scroll", "direction": "down"}',
        '{"action_type": "navigate_back"}',
    ]
    assert wifi.initial_observation.format == "android_ui_tree"
    assert wifi.initial_observation.text.splitlines() == [
        f"Package: {SETTINGS}  Activity: unknown",
        '[0] android.widget.TextView "9:41" @(20,0,200,60)',
        '[1] android.widget.TextView "Settings" @(40,100,1040,200)',
        f'[2] android.widget.LinearLayout "" id={SETTINGS}:id/dashboard_tile @(0,300,1080,450) clickable',
        '  [3] android.widget.TextView "Network & internet" @(40,320,1040,430)',
    ]  # the invisible node is left out; layout-only frames fold into their children
    # The click names the node under the point, on the screen it was taken on.
    assert wifi.steps[0].info["element"]["index"] == 3
    assert wifi.steps[0].info["step_instruction"] == "Open Network & internet"
    assert '[2] android.widget.Switch "" desc="Wi-Fi" @(900,300,1040,400) clickable,checked' in (
        wifi.steps[0].observation.text
    )
    assert wifi.steps[-1].observation.text == wifi.initial_observation.text
    source_row = wifi.provenance.source
    assert source_row.dataset == "google-research/android_control" and source_row.row_id == "1001"
    assert source_row.format == "android_control" and source_row.license == "Apache-2.0"

    search = found["1002"]  # camelCase forests as JSON text, false flags left out
    assert [s.action.text for s in search.steps] == [
        '{"action_type": "open_app", "app_name": "Settings"}',
        '{"action_type": "input_text", "index": 0, "text": "battery"}',
    ]
    assert search.steps[1].info["source_action"].startswith("type")
    assert search.steps[0].observation.text.splitlines()[1] == (
        '[0] android.widget.EditText "" @(40,100,1040,200) clickable,editable,focused'
    )

    letter = json.loads((out / "dead_letter" / "import-android_control.jsonl").read_text())
    assert letter["row_id"] == "1003" and "'shake'" in letter["reason"], letter

    assert main(["android_control", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    assert "already imported by an earlier run (skipped): 2" in capsys.readouterr().out
    assert len(list(read_trajectories(out))) == 2


# The real ADP sample (agent-data-protocol, datasets/androidcontrol/sample_raw.json; SOURCES.md there).
SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "public-samples"
ADP_SAMPLE = SAMPLES / "android_control" / "adp_androidcontrol_3episodes.json"


def test_adp_flat_element_screens_import_as_android_trajectories(tmp_path: Path, capsys) -> None:
    assert ADP_SAMPLE.is_file(), f"{ADP_SAMPLE} is missing: the public samples must sit beside the repository"
    out = tmp_path / "out"
    assert main(["android_control", "--input", str(ADP_SAMPLE), "--out", str(out), "--no-progress"]) == 0
    assert "imported 3 of 3 rows" in capsys.readouterr().out
    assert not (out / "dead_letter").exists()
    found = {t.task.id: t for t in read_trajectories(out, validate=True)}
    assert {key: len(t.steps) for key, t in found.items()} == {"0": 3, "20": 4, "40": 1}
    assert {t.outcome.status for t in found.values()} == {"completed"}

    meet = found["0"]
    assert meet.task.instruction == "Open the Zoho Meet app , view the scheduled meetings ."
    assert [s.action.text for s in meet.steps] == [
        '{"action_type": "open_app", "app_name": "Zoho Meeting"}',
        '{"action_type": "wait", "seconds": 1.0}',
        '{"action_type": "click", "x": 540, "y": 390}',
    ]
    # A flat screen: every element at depth 0 in the list's order; ADP keeps no package name.
    assert meet.initial_observation.text.splitlines()[:3] == [
        "Package: unknown  Activity: unknown",
        '[0] android.widget.TextView "8:37" desc="8:37 AM" @(145,1,229,136)',
        '[1] android.widget.LinearLayout "" desc="Battery charging, 100 percent." @(986,1,1006,136)',
    ]
    assert '[7] android.widget.ImageButton "" desc="Create new event or other calendar entries" ' in (
        meet.initial_observation.text
    )
    assert meet.initial_observation.data == {
        "package": "unknown",
        "activity": "unknown",
        "nodes": 34,
        "truncated": False,
    }
    # The click lands on the smallest node under the point: the tab's label, not the tab bar.
    assert meet.steps[2].info["element"] == {
        "index": 13,
        "class": "android.widget.TextView",
        "text": "PAST",
        "desc": "",
    }
    assert meet.steps[2].info["step_instruction"] == "Go to the Past section"
    assert (
        '[13] android.widget.TextView "PAST" @(494,365,586,416) selected'
        in meet.steps[2].observation.text.splitlines()
    )

    shop = found["20"]
    assert [s.info.get("element", {}).get("text") for s in shop.steps] == [None, "Mobiles", "Close ad", None]
    assert shop.steps[-1].action.text == '{"action_type": "scroll", "direction": "down"}'

    sofa = found["40"]
    assert sofa.initial_observation.text.splitlines()[21:23] == [
        '[20] android.widget.TextView "46% OFF" @(137,2286,257,2325)',
        '[21] android.widget.TextView "33% OFF" @(480,2286,598,2325)',
    ]
    assert '[16] android.widget.TextView "₹2,694" @(77,2234,198,2286)' in sofa.steps[0].observation.text
    assert (
        sofa.steps[0].observation.text.splitlines()[5]
        == '[4] android.widget.TextView "Sort" @(273,2250,351,2302)'
    )
    assert sofa.environment.config == {"screen_width": 1080, "screen_height": 2400}


def test_flat_elements_hide_invisible_ones_and_mark_disabled_ones(tmp_path: Path, capsys) -> None:
    def element(text: str, box: tuple[float, float, float, float], **flags: bool) -> dict:
        x_min, y_min, x_max, y_max = box
        return {
            "text": text,
            "content_description": None,
            "class_name": "android.widget.Button",
            "resource_id": "com.example:id/" + text.lower(),
            "package_name": "com.example",
            "bbox_pixels": {"x_min": x_min, "x_max": x_max, "y_min": y_min, "y_max": y_max},
            "is_visible": True,
            "is_enabled": True,
            **flags,
        }

    screen = [
        element("OK", (10.4, 20, 110.6, 80), is_clickable=True),
        element("Hidden", (0, 0, 5, 5), is_visible=False),
        element("Off", (10, 100, 110, 160), is_enabled=False),
    ]
    episode = {
        "episode_id": 7,
        "goal": "Press OK",
        "accessibility_trees": [screen, screen],
        "actions": [{"action_type": "click", "x": 50, "y": 50}, {"action_type": "navigate_back"}],
    }
    source = tmp_path / "flat.jsonl"
    broken = {**episode, "episode_id": 8, "accessibility_trees": [[1, 2], screen]}
    source.write_text(json.dumps(episode) + "\n" + json.dumps(broken) + "\n")
    out = tmp_path / "out"
    assert main(["android_control", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    assert "imported 1 of 2 rows" in capsys.readouterr().out
    (pressed,) = read_trajectories(out, validate=True)
    assert pressed.initial_observation.text.splitlines() == [
        "Package: com.example  Activity: unknown",
        '[0] android.widget.Button "OK" id=com.example:id/ok @(10,20,111,80) clickable',
        '[1] android.widget.Button "Off" id=com.example:id/off @(10,100,110,160) disabled',
    ]
    assert pressed.outcome.status == "truncated"  # two screens for two actions: the last one is lost
    assert pressed.steps[0].info["element"]["text"] == "OK"
    letter = json.loads((out / "dead_letter" / "import-android_control.jsonl").read_text())
    assert letter["row_id"] == "8" and letter["reason"] == (
        "accessibility_trees[0][0] should be a UI element object, got int"
    )

"""Android action parsing and the page-source compaction, without a server."""

from __future__ import annotations

import json

import jsonschema
import pytest

from sandboxes.android import (
    ACTION_KINDS,
    ACTION_SCHEMA,
    HOOKS,
    AndroidConfig,
    AndroidSandbox,
    parse_action,
    parse_screen,
)
from sandboxes.android.tree import PageSourceError, render
from sandboxes.base import InvalidActionError
from sandboxes.domains import domain_spec
from schemas.records import Environment
from tests.sandboxes.android.fake_apps import NOTES_APP, NOTES_TREE, long_list_app


@pytest.mark.parametrize(
    ("kind", "arguments", "text"),
    [
        ("click", {"index": 3}, '{"action_type": "click", "index": 3}'),
        ("click", {"index": "3"}, '{"action_type": "click", "index": 3}'),
        ("click", {"x": 10.4, "y": 20}, '{"action_type": "click", "x": 10, "y": 20}'),
        (
            "long_press",
            {"action_type": "long_press", "index": 0},
            '{"action_type": "long_press", "index": 0}',
        ),
        (
            "input_text",
            {"text": "héllo", "index": 1},
            '{"action_type": "input_text", "index": 1, "text": "héllo"}',
        ),
        ("input_text", {"text": "x"}, '{"action_type": "input_text", "text": "x"}'),
        ("scroll", {"direction": "down"}, '{"action_type": "scroll", "direction": "down"}'),
        (
            "swipe",
            {"x": 1, "y": 2, "to_x": 3, "to_y": 4},
            '{"action_type": "swipe", "x": 1, "y": 2, "to_x": 3, "to_y": 4}',
        ),
        ("navigate_back", {}, '{"action_type": "navigate_back"}'),
        ("navigate_home", {}, '{"action_type": "navigate_home"}'),
        ("keyboard_enter", {}, '{"action_type": "keyboard_enter"}'),
        ("open_app", {"app_name": " Settings "}, '{"action_type": "open_app", "app_name": "Settings"}'),
        ("wait", {}, '{"action_type": "wait", "seconds": 1.0}'),
    ],
)
def test_actions_parse_to_canonical_json(kind: str, arguments: dict, text: str) -> None:
    action = parse_action(kind, arguments)
    assert action.kind == kind and action.text == text
    assert json.loads(action.text) == {"action_type": kind, **action.arguments}
    jsonschema.validate(json.loads(action.text), ACTION_SCHEMA)  # the schema agrees with the parser


@pytest.mark.parametrize(
    ("kind", "arguments", "message"),
    [
        ("tap", {"index": 1}, "unknown Android action_type 'tap'"),
        ("click", {}, "needs the 'index' of a node, or 'x' and 'y'"),
        ("click", {"index": 1, "x": 2, "y": 3}, "not both"),
        ("click", {"index": -1}, "'index' must be the [number]"),
        ("click", {"index": True}, "'index' must be the [number]"),
        ("click", {"x": 5}, "needs a number 'y'"),
        ("click", {"x": -5, "y": 1}, "must be >= 0"),
        ("input_text", {"index": 1}, "non-empty string 'text'"),
        ("scroll", {"direction": "sideways"}, "'direction' must be one of"),
        ("swipe", {"x": 1, "y": 2, "to_x": 3}, "needs a number 'to_y'"),
        ("open_app", {"app_name": ""}, "non-empty string 'app_name'"),
        ("wait", {"seconds": 99}, "between 0 and 30"),
        ("navigate_back", {"index": 2}, "unknown argument(s) ['index']"),
        ("click", {"action_type": "scroll", "index": 1}, "disagrees"),
    ],
)
def test_malformed_actions_say_why(kind: str, arguments: dict, message: str) -> None:
    with pytest.raises(InvalidActionError, match=None) as caught:
        parse_action(kind, arguments)
    assert message in str(caught.value)
    with pytest.raises(jsonschema.ValidationError):  # the schema refuses it too
        jsonschema.validate({"action_type": kind, **arguments}, ACTION_SCHEMA)


def _as_loaded(xml: str) -> str:
    """The page source the fake driver serves for an app XML (it wraps <app> in <AppiumAUT>)."""
    return xml.replace("<app ", "<AppiumAUT><app ").replace("</app>", "</app></AppiumAUT>")


def test_tree_text_folds_hides_and_flags() -> None:
    screen = parse_screen(_as_loaded(NOTES_APP))
    assert render(screen, screen.package, "") == NOTES_TREE
    # Each shown node keeps the positional XPath that finds it in the same source.
    assert [node.xpath for node in screen.nodes][:2] == [
        "/*[1]/*[1]/*[1]/*[1]/*[1]",
        "/*[1]/*[1]/*[1]/*[1]/*[2]",
    ]
    assert screen.nodes[1].center == (540, 260)
    error_first = render(screen, "p", "a", "no node [9] on the screen").splitlines()
    assert error_first[:2] == ["Error: no node [9] on the screen", "Package: p  Activity: a"]


def test_tree_is_bounded_and_escapes_text() -> None:
    screen = parse_screen(_as_loaded(long_list_app(40)), max_nodes=10)
    lines = render(screen, "", "").splitlines()
    assert len(screen.nodes) == 10 and screen.truncated
    assert lines[-1] == "[... 30 more nodes not shown]"  # 40 rows (the list is folded), 10 shown
    quoted = parse_screen('<hierarchy><node class="A" text="say &quot;hi&quot;&#10;twice"/></hierarchy>')
    assert render(quoted, "", "").splitlines()[1] == '[0] A "say \\"hi\\"\\ntwice" @(0,0,0,0)'
    with pytest.raises(PageSourceError):
        parse_screen("not xml <")


def test_domain_spec_is_registered() -> None:
    spec = domain_spec("android")
    assert spec.hooks is HOOKS and spec.observation_format == "android_ui_tree"
    assert spec.parse_action("navigate_back", {}).text == '{"action_type": "navigate_back"}'
    assert all(f'"{kind}"' in spec.action_space for kind in ACTION_KINDS)
    config = AndroidConfig(automation_name="Fake", app="/tmp/app.xml", max_nodes=42)
    replay = spec.replay_sandbox(Environment(name="android", backend="appium-fake", config=config.recorded()))
    assert isinstance(replay, AndroidSandbox) and replay.config == config and not replay.alive

"""Web action parsing: every kind's shape, its BrowserGym call text, and malformed actions."""

from __future__ import annotations

import pytest

from sandboxes.base import InvalidActionError
from sandboxes.domains import domain_spec
from sandboxes.web import ACTION_KINDS, WebConfig, parse_action
from schemas.records import Environment

VALID = [
    ("noop", {}, "noop()"),
    ("noop", {"wait_ms": 250}, "noop(250)"),
    ("scroll", {"delta_x": 0, "delta_y": 300}, "scroll(0.0, 300.0)"),
    ("click", {"bid": "12"}, "click('12')"),
    ("click", {"bid": 12, "button": "right"}, "click('12', button='right')"),
    ("click", {"bid": "3", "modifiers": ["Shift"]}, "click('3', modifiers=['Shift'])"),
    ("dblclick", {"bid": "4"}, "dblclick('4')"),
    ("hover", {"bid": "5"}, "hover('5')"),
    ("fill", {"bid": "7", "value": "alice@example.com"}, "fill('7', 'alice@example.com')"),
    ("select_option", {"bid": "9", "options": "Blue"}, "select_option('9', 'Blue')"),
    ("select_option", {"bid": "9", "options": ["A", "B"]}, "select_option('9', ['A', 'B'])"),
    ("clear", {"bid": "7"}, "clear('7')"),
    ("focus", {"bid": "7"}, "focus('7')"),
    ("press", {"bid": "7", "key_comb": "Enter"}, "press('7', 'Enter')"),
    ("keyboard_press", {"key": "Control+a"}, "keyboard_press('Control+a')"),
    ("keyboard_type", {"text": "it's"}, 'keyboard_type("it\'s")'),
    ("mouse_move", {"x": 10, "y": 20.5}, "mouse_move(10.0, 20.5)"),
    ("mouse_click", {"x": 1, "y": 2}, "mouse_click(1.0, 2.0)"),
    ("mouse_dblclick", {"x": 1, "y": 2, "button": "middle"}, "mouse_dblclick(1.0, 2.0, button='middle')"),
    ("goto", {"url": "http://shop.agentworld.test/cart"}, "goto('http://shop.agentworld.test/cart')"),
    ("go_back", {}, "go_back()"),
    ("go_forward", {}, "go_forward()"),
    ("new_tab", {}, "new_tab()"),
    ("tab_focus", {"index": 1}, "tab_focus(1)"),
    ("tab_close", {}, "tab_close()"),
    ("send_msg_to_user", {"text": "Done"}, "send_msg_to_user('Done')"),
    ("report_infeasible", {"reason": "No such item"}, "report_infeasible('No such item')"),
]


@pytest.mark.parametrize(("kind", "arguments", "text"), VALID)
def test_valid_actions_get_their_browsergym_text(kind: str, arguments: dict, text: str) -> None:
    action = parse_action(kind, arguments)
    assert action.kind == kind
    assert action.text == text


def test_every_kind_has_a_valid_example() -> None:
    assert {kind for kind, _, _ in VALID} == set(ACTION_KINDS)


@pytest.mark.parametrize(
    ("kind", "arguments", "reason"),
    [
        ("teleport", {}, "unknown web action kind"),
        ("click", {}, "needs a 'bid'"),
        ("click", {"bid": ""}, "needs a 'bid'"),
        ("click", {"bid": "1", "button": "thumb"}, "button must be one of"),
        ("click", {"bid": "1", "modifiers": ["Hyper"]}, "modifiers"),
        ("click", {"bid": "1", "extra": 1}, "unknown argument"),
        ("fill", {"bid": "1"}, "needs a string 'value'"),
        ("select_option", {"bid": "1", "options": []}, "options"),
        ("scroll", {"delta_x": "a lot", "delta_y": 0}, "finite number"),
        ("scroll", {"delta_x": float("nan"), "delta_y": 0}, "finite number"),
        ("tab_focus", {"index": -1}, "index"),
        ("tab_focus", {"index": True}, "index"),
        ("goto", {"url": ""}, "must not be empty"),
        ("noop", {"wait_ms": 10**9}, "wait_ms"),
        ("keyboard_press", {"key": ""}, "must not be empty"),
    ],
)
def test_malformed_actions_raise_invalid_action(kind: str, arguments: dict, reason: str) -> None:
    with pytest.raises(InvalidActionError, match=reason):
        parse_action(kind, arguments)


def test_arguments_must_be_an_object() -> None:
    with pytest.raises(InvalidActionError, match="must be an object"):
        parse_action("click", ["1"])  # type: ignore[arg-type]


def test_domain_spec_and_replay_config_round_trip() -> None:
    spec = domain_spec("web")
    assert spec.observation_format == "a11y_tree"
    assert spec.parse_action("click", {"bid": "1"}).text == "click('1')"
    assert '"action": "click"' in spec.action_space
    config = WebConfig(settle_timeout_ms=1234, screenshots=True, sites_port=4321)
    recorded = Environment(name="web", backend="chromium", config=config.recorded())
    assert "sites_port" not in recorded.config
    fresh = spec.replay_sandbox(recorded)
    assert fresh.config.settle_timeout_ms == 1234 and fresh.config.screenshots
    assert fresh.config.sites_port is None  # a replay starts its own sites server
    assert not fresh.alive

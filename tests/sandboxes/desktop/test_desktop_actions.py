"""Desktop actions as data: parsing, the pyautogui code each computer action is written as, the
action space's examples, and the domain registration. No desktop needed."""

from __future__ import annotations

import pytest

from sandboxes.base import InvalidActionError
from sandboxes.desktop import ACTION_SCHEMA, ACTION_SPACE, COMPUTER_ACTIONS, parse_action, to_pyautogui
from sandboxes.domains import KNOWN_DOMAINS, domain_spec

CODE = {
    "move": ({"x": 10, "y": 20}, "pyautogui.moveTo(10, 20)"),
    "click": (
        {"x": 10, "y": 20, "button": "right", "clicks": 2},
        "pyautogui.click(10, 20, clicks=2, button='right')",
    ),
    "double_click": ({"x": 1, "y": 2}, "pyautogui.doubleClick(1, 2)"),
    "right_click": ({"x": 1, "y": 2}, "pyautogui.rightClick(1, 2)"),
    "drag": (
        {"x": 1, "y": 2, "to_x": 30, "to_y": 40},
        "pyautogui.moveTo(1, 2)\npyautogui.dragTo(30, 40, duration=0.5)",
    ),
    "scroll": ({"clicks": -3, "x": 5, "y": 6}, "pyautogui.scroll(-3, x=5, y=6)"),
    "type": ({"text": "it's\n"}, 'pyautogui.write("it\'s\\n")'),
    "press": ({"key": "enter"}, "pyautogui.press('enter')"),
    "hotkey": ({"keys": ["ctrl", "shift", "t"]}, "pyautogui.hotkey('ctrl', 'shift', 't')"),
    "wait": ({"seconds": 1.5}, "time.sleep(1.5)"),
}


@pytest.mark.parametrize("name", sorted(COMPUTER_ACTIONS))
def test_each_computer_action_is_written_as_pyautogui_code(name: str) -> None:
    arguments, code = CODE[name]
    action = parse_action("computer", {"action": name, **arguments})
    assert action.text == code == to_pyautogui(action.arguments)
    compile(action.text, "<action>", "exec")


def test_pyautogui_code_is_kept_as_written() -> None:
    code = "import pyautogui\npyautogui.click(x=120, y=240)"
    action = parse_action("pyautogui", {"code": code})
    assert (action.kind, action.arguments, action.text) == ("pyautogui", {"code": code}, code)


@pytest.mark.parametrize(
    ("kind", "arguments", "message"),
    [
        ("computer", {"action": "click", "x": True, "y": 1}, "x must be an integer"),
        ("computer", {"action": "click", "x": 1, "y": 2, "clicks": 9}, "clicks must be between 1 and 3"),
        ("computer", {"action": "scroll", "clicks": 0}, "clicks must not be 0"),
        ("computer", {"action": "scroll", "clicks": 2, "x": 3}, "needs both x and y"),
        ("computer", {"action": "hotkey", "keys": []}, "non-empty list of key names"),
        ("computer", {"action": "wait", "seconds": 600}, "seconds must be a number from 0 to 60"),
        ("computer", {"action": "type", "text": ""}, "text must be a non-empty string"),
        ("computer", {"action": "click", "x": 1, "y": 2, "button": "fourth"}, "button must be one of"),
        ("pyautogui", {"code": "x", "timeout": 3}, "unknown argument(s) ['timeout']"),
        ("computer", ["click"], "arguments must be an object"),
    ],
)
def test_malformed_actions_say_why(kind: str, arguments: object, message: str) -> None:
    with pytest.raises(InvalidActionError) as raised:
        parse_action(kind, arguments)  # type: ignore[arg-type]
    assert message in str(raised.value)


def test_action_space_examples_parse_as_llm_replies() -> None:
    from collectors.policies.llm import parse_reply

    spec = domain_spec("os")
    examples = [line.strip() for line in ACTION_SPACE.splitlines() if line.startswith("  {")]
    assert len(examples) == 12
    for example in examples:
        action = parse_reply(example, spec)
        assert action is not None and action.kind in ("pyautogui", "computer"), (example, action)
        assert action.text and "error" not in action.arguments, (example, action)
    assert parse_reply('{"done": true}', spec) is None
    assert [option["properties"]["action"].get("const") for option in ACTION_SCHEMA["oneOf"]] == [
        "pyautogui",
        None,
    ]


def test_a_computer_action_name_is_a_kind_too() -> None:
    assert parse_action("click", {"x": 3, "y": 4}) == parse_action(
        "computer", {"action": "click", "x": 3, "y": 4}
    )


def test_os_is_a_known_domain() -> None:
    assert "os" in KNOWN_DOMAINS
    spec = domain_spec("os")
    assert (spec.name, spec.observation_format) == ("os", "desktop_a11y_tree")
    assert spec.parse_action("computer", {"action": "press", "key": "f5"}).text == "pyautogui.press('f5')"
    sandbox = spec.replay_sandbox(
        __import__("schemas.records", fromlist=["Environment"]).Environment(
            name="os", backend="ssh", config={"width": 1024, "height": 768, "max_nodes": 50}
        )
    )
    assert (sandbox.config.width, sandbox.config.height, sandbox.config.max_nodes) == (1024, 768, 50)
    assert not sandbox.alive

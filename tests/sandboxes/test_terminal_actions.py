"""Action parsing: pure logic, no tmux needed."""

from __future__ import annotations

import pytest

from sandboxes.base import InvalidActionError
from sandboxes.terminal import command_action, is_key_name, keystrokes_action, parse_action


def test_command_action_text_and_arguments() -> None:
    action = command_action("ls -la", timeout=5)
    assert (action.kind, action.arguments, action.text) == (
        "command",
        {"command": "ls -la", "timeout": 5.0},
        "ls -la",
    )


def test_keystrokes_accepts_tuples_and_dicts_and_renders_compactly() -> None:
    a = keystrokes_action([("ls -la\n", 0.5), ("C-c", 0.1)])
    b = keystrokes_action(
        [{"keystrokes": "ls -la\n", "duration": 0.5}, {"keystrokes": "C-c", "duration": 0.1}]
    )
    assert a == b
    assert a.arguments["keystrokes"][1] == {"keystrokes": "C-c", "duration": 0.1}
    assert a.text == '"ls -la\\n" (0.5s); C-c (0.1s)'


@pytest.mark.parametrize(
    "name", ["C-c", "M-x", "Enter", "Escape", "Tab", "BSpace", "Up", "PageDown", "F1", "F12", "C-M-a"]
)
def test_key_names(name: str) -> None:
    assert is_key_name(name)


@pytest.mark.parametrize("text", ["ls", "C-", "Enter ", "F13", "q", "echo C-c", "C-cc", ""])
def test_not_key_names(text: str) -> None:
    assert not is_key_name(text)


@pytest.mark.parametrize(
    ("kind", "arguments", "message"),
    [
        ("command", {}, "needs a 'command' string"),
        ("command", {"command": 3}, "needs a 'command' string"),
        ("command", {"command": "a\nb"}, "one line"),
        ("command", {"command": "ls", "timeout": -1}, "between 0"),
        ("command", {"command": "ls", "timeout": "5"}, "number of seconds"),
        ("command", {"command": "ls", "cwd": "/"}, "unknown argument"),
        ("keystrokes", {"keystrokes": []}, "non-empty list"),
        ("keystrokes", {"keystrokes": "ls\n"}, "non-empty list"),
        ("keystrokes", {"keystrokes": [{"duration": 1}]}, "item 0"),
        ("keystrokes", {"keystrokes": [{"keystrokes": "x", "duration": float("nan")}]}, "number of seconds"),
        ("keystrokes", {"keystrokes": [{"keystrokes": "x", "wait": 1}]}, "unknown field"),
        ("click", {"x": 1}, "unknown terminal action kind"),
    ],
)
def test_malformed_actions_raise_invalid_action_error(kind: str, arguments: dict, message: str) -> None:
    with pytest.raises(InvalidActionError, match=message):
        parse_action(kind, arguments)

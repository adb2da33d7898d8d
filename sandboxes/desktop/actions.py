"""Desktop actions as data: pyautogui code (AgentWorldBench's OS action) and structured computer
actions, each parsed with a clear error and written as the equivalent pyautogui code in `text`.

    Action(kind="pyautogui", arguments={"code": "pyautogui.click(x=120, y=240)"})
    Action(kind="computer", arguments={"action": "click", "x": 120, "y": 240})

An LLM agent replies `{"action": "click", "x": 120, "y": 240}` (the generic reply form): a computer
action's name given as the kind is parsed as that computer action.

The corpus writes every action as its pyautogui code (`to_pyautogui`), as the public OS domain does.
Key names are pyautogui's (enter, ctrl, f5, a); the guest's table (guest/key_names.py)
is the one list of them.
"""

from __future__ import annotations

import math
from typing import Any

from sandboxes.base import InvalidActionError
from sandboxes.desktop.guest.key_names import BUTTONS, KEYSYMS
from schemas.records import Action

PYAUTOGUI = "pyautogui"
COMPUTER = "computer"
ACTION_KINDS = (PYAUTOGUI, COMPUTER)
MAX_CODE_CHARS = 20_000
MAX_TEXT_CHARS = 10_000
MAX_WAIT = 60.0
MAX_SCROLL = 50
# Each computer action's required and optional arguments.
COMPUTER_ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "move": (("x", "y"), ()),
    "click": (("x", "y"), ("button", "clicks")),
    "double_click": (("x", "y"), ()),
    "right_click": (("x", "y"), ()),
    "drag": (("x", "y", "to_x", "to_y"), ("button",)),
    "scroll": (("clicks",), ("x", "y")),
    "type": (("text",), ()),
    "press": (("key",), ()),
    "hotkey": (("keys",), ()),
    "wait": (("seconds",), ()),
}

ACTION_SPACE = """Each turn you see the desktop's accessibility tree: one node per line,
`[id] role "name" value="..." states=... @(x,y wxh)`, where (x,y) is the node's top-left corner on
the screen and wxh its size; click a node at its centre. Reply with exactly one JSON object:
- pyautogui code run on the desktop (the module is imported for you):
  {"action": "pyautogui", "code": "pyautogui.click(x=120, y=240)"}
- or one computer action:
  {"action": "click", "x": 120, "y": 240}
  {"action": "click", "x": 120, "y": 240, "button": "right", "clicks": 2}
  {"action": "double_click", "x": 120, "y": 240}
  {"action": "right_click", "x": 120, "y": 240}
  {"action": "move", "x": 120, "y": 240}
  {"action": "drag", "x": 10, "y": 20, "to_x": 300, "to_y": 40}
  {"action": "scroll", "clicks": -3, "x": 400, "y": 300}
  {"action": "type", "text": "hello\\n"}
  {"action": "press", "key": "enter"}
  {"action": "hotkey", "keys": ["ctrl", "s"]}
  {"action": "wait", "seconds": 1}
- stop when the task is finished: {"done": true}
Scroll clicks: positive up, negative down. Key names are pyautogui's: enter, esc, tab, backspace,
delete, up, down, left, right, home, end, pageup, pagedown, ctrl, shift, alt, win, f1-f12, or one
character."""

_POINT = {"type": "integer", "minimum": 0}
# The reply an LLM agent writes (the generic `{"action": <kind>, ...arguments}` form).
ACTION_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"action": {"const": PYAUTOGUI}, "code": {"type": "string", "minLength": 1}},
            "required": ["action", "code"],
        },
        {
            "type": "object",
            "properties": {
                "action": {"enum": list(COMPUTER_ACTIONS)},
                "x": _POINT,
                "y": _POINT,
                "to_x": _POINT,
                "to_y": _POINT,
                "button": {"enum": list(BUTTONS)},
                "clicks": {"type": "integer"},
                "text": {"type": "string"},
                "key": {"type": "string"},
                "keys": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "seconds": {"type": "number", "minimum": 0, "maximum": MAX_WAIT},
            },
            "required": ["action"],
        },
    ]
}


def is_key(name: Any) -> bool:
    """A pyautogui key name the desktop can press."""
    if not isinstance(name, str) or not name:
        return False
    return (name.lower() if len(name) > 1 else name) in KEYSYMS or (len(name) == 1 and name.isprintable())


def _integer(args: dict[str, Any], name: str, lower: int | None = 0, upper: int | None = None) -> int:
    value = args[name]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidActionError(f"{args['action']} action: {name} must be an integer, got {value!r}")
    if (lower is not None and value < lower) or (upper is not None and value > upper):
        raise InvalidActionError(f"{args['action']} action: {name} must be between {lower} and {upper}")
    return value


def _check_computer(args: dict[str, Any]) -> dict[str, Any]:
    kind = args.get("action")
    if kind not in COMPUTER_ACTIONS:
        raise InvalidActionError(
            f"unknown computer action {kind!r}; expected one of {', '.join(COMPUTER_ACTIONS)}"
        )
    required, optional = COMPUTER_ACTIONS[kind]
    missing = [a for a in required if a not in args]
    extra = sorted(set(args) - {"action", *required, *optional})
    if missing:
        raise InvalidActionError(f"{kind} action needs {', '.join(missing)}")
    if extra:
        raise InvalidActionError(f"{kind} action: unknown argument(s) {extra}")
    out: dict[str, Any] = {"action": kind}
    for name in ("x", "y", "to_x", "to_y"):
        if name in args:
            out[name] = _integer(args, name)
    if "x" in args or "y" in args:
        if "x" not in args or "y" not in args:
            raise InvalidActionError(f"{kind} action needs both x and y")
    if "button" in args:
        if args["button"] not in BUTTONS:
            raise InvalidActionError(f"{kind} action: button must be one of {', '.join(BUTTONS)}")
        out["button"] = args["button"]
    if "clicks" in args:
        low, high = (1, 3) if kind == "click" else (-MAX_SCROLL, MAX_SCROLL)
        out["clicks"] = _integer(args, "clicks", low, high)
        if out["clicks"] == 0:
            raise InvalidActionError("scroll action: clicks must not be 0 (positive up, negative down)")
    if "text" in args:
        if not isinstance(args["text"], str) or not args["text"] or len(args["text"]) > MAX_TEXT_CHARS:
            raise InvalidActionError(
                f"type action: text must be a non-empty string of at most {MAX_TEXT_CHARS}"
            )
        out["text"] = args["text"]
    if "key" in args:
        if not is_key(args["key"]):
            raise InvalidActionError(f"press action: unknown key {args['key']!r} (use pyautogui key names)")
        out["key"] = args["key"]
    if "keys" in args:
        keys = args["keys"]
        if not isinstance(keys, list) or not keys or not all(is_key(k) for k in keys):
            raise InvalidActionError(
                f"hotkey action: keys must be a non-empty list of key names, got {keys!r}"
            )
        out["keys"] = list(keys)
    if "seconds" in args:
        seconds = args["seconds"]
        ok = isinstance(seconds, int | float) and not isinstance(seconds, bool) and math.isfinite(seconds)
        if not ok or not 0 <= seconds <= MAX_WAIT:
            raise InvalidActionError(f"wait action: seconds must be a number from 0 to {MAX_WAIT:g}")
        out["seconds"] = float(seconds)
    return out


def to_pyautogui(arguments: dict[str, Any]) -> str:
    """A validated computer action as the pyautogui code that does the same."""
    a = arguments
    kind = a["action"]
    at = f"{a['x']}, {a['y']}" if "x" in a else ""
    if kind == "move":
        return f"pyautogui.moveTo({at})"
    if kind == "click":
        extra = (f", clicks={a['clicks']}" if a.get("clicks", 1) != 1 else "") + (
            f", button={a['button']!r}" if a.get("button", "left") != "left" else ""
        )
        return f"pyautogui.click({at}{extra})"
    if kind == "double_click":
        return f"pyautogui.doubleClick({at})"
    if kind == "right_click":
        return f"pyautogui.rightClick({at})"
    if kind == "drag":
        button = f", button={a['button']!r}" if a.get("button", "left") != "left" else ""
        return f"pyautogui.moveTo({at})\npyautogui.dragTo({a['to_x']}, {a['to_y']}, duration=0.5{button})"
    if kind == "scroll":
        return f"pyautogui.scroll({a['clicks']}" + (f", x={a['x']}, y={a['y']})" if at else ")")
    if kind == "type":
        return f"pyautogui.write({a['text']!r})"
    if kind == "press":
        return f"pyautogui.press({a['key']!r})"
    if kind == "hotkey":
        return f"pyautogui.hotkey({', '.join(repr(k) for k in a['keys'])})"
    return f"time.sleep({a['seconds']:g})"


def parse_action(kind: str, arguments: dict[str, Any]) -> Action:
    """Validate a desktop action; raise InvalidActionError with the reason if malformed."""
    if not isinstance(arguments, dict):
        raise InvalidActionError(
            f"desktop action arguments must be an object, got {type(arguments).__name__}"
        )
    if kind == PYAUTOGUI:
        extra = sorted(set(arguments) - {"code"})
        code = arguments.get("code")
        if extra:
            raise InvalidActionError(f"pyautogui action: unknown argument(s) {extra}; it takes only code")
        if not isinstance(code, str) or not code.strip():
            raise InvalidActionError("pyautogui action needs 'code': Python that calls pyautogui")
        if len(code) > MAX_CODE_CHARS:
            raise InvalidActionError(f"pyautogui code is longer than {MAX_CODE_CHARS} characters")
        try:
            compile(code, "<action>", "exec")
        except SyntaxError as exc:
            raise InvalidActionError(f"pyautogui code does not parse: {exc.msg} (line {exc.lineno})") from exc
        return Action(kind=PYAUTOGUI, arguments={"code": code}, text=code)
    if kind in COMPUTER_ACTIONS:  # the LLM reply form names the computer action as the kind
        arguments = {"action": kind, **arguments}
        kind = COMPUTER
    if kind == COMPUTER:
        checked = _check_computer(arguments)
        return Action(kind=COMPUTER, arguments=checked, text=to_pyautogui(checked))
    raise InvalidActionError(f"unknown desktop action kind {kind!r}; expected {' or '.join(ACTION_KINDS)}")

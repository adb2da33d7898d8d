"""Web actions as typed data: BrowserGym's high-level action set, keyed by element `bid`.

`parse_action(kind, arguments)` checks an action's shape and fills `Action.text` with the
BrowserGym call string (`click('12')`, `fill('7', 'alice@example.com')`), which is how a world
model is shown the action. Whether the bid exists is the sandbox's business, not the parser's:
an action on a missing element is well formed and gets an observation with the error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sandboxes.base import InvalidActionError
from schemas.records import Action

BUTTONS = ("left", "middle", "right")
MODIFIERS = ("Alt", "Control", "ControlOrMeta", "Meta", "Shift")
MAX_WAIT_MS = 30_000


def _string(arguments: dict[str, Any], name: str, kind: str, allow_empty: bool = True) -> str:
    value = arguments.get(name)
    if not isinstance(value, str):
        raise InvalidActionError(f"{kind} needs a string {name!r}, got {value!r}")
    if not allow_empty and not value:
        raise InvalidActionError(f"{kind}: {name!r} must not be empty")
    return value


def _bid(arguments: dict[str, Any], kind: str) -> str:
    value = arguments.get("bid")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # models often write bids as numbers; the element is the same
    if not isinstance(value, str) or not value.strip():
        raise InvalidActionError(f"{kind} needs a 'bid' string naming an element, got {value!r}")
    return value.strip()


def _number(arguments: dict[str, Any], name: str, kind: str) -> float:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidActionError(f"{kind} needs a finite number {name!r}, got {value!r}")
    return float(value)


def _button(arguments: dict[str, Any], kind: str) -> str:
    button = arguments.get("button", "left")
    if button not in BUTTONS:
        raise InvalidActionError(f"{kind}: button must be one of {list(BUTTONS)}, got {button!r}")
    return button


def _quote(value: object) -> str:
    return repr(value)  # Python literal syntax, as BrowserGym's action strings use


def _call(kind: str, *args: object, **kwargs: object) -> str:
    parts = [_quote(a) for a in args] + [f"{k}={_quote(v)}" for k, v in kwargs.items()]
    return f"{kind}({', '.join(parts)})"


def _with_button(clean: dict[str, Any], positional: list[object], kind: str) -> str:
    extra = {"button": clean["button"]} if clean["button"] != "left" else {}
    return _call(kind, *positional, **extra)


def _noop(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    if "wait_ms" not in a:
        return {}, "noop()"
    wait = _number(a, "wait_ms", "noop")
    if not 0 <= wait <= MAX_WAIT_MS:
        raise InvalidActionError(f"noop: wait_ms must be between 0 and {MAX_WAIT_MS}, got {wait:g}")
    return {"wait_ms": int(wait)}, _call("noop", int(wait))


def _scroll(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    dx, dy = _number(a, "delta_x", "scroll"), _number(a, "delta_y", "scroll")
    return {"delta_x": dx, "delta_y": dy}, _call("scroll", dx, dy)


def _click(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    clean: dict[str, Any] = {"bid": _bid(a, "click"), "button": _button(a, "click")}
    modifiers = a.get("modifiers", [])
    if not isinstance(modifiers, list) or any(m not in MODIFIERS for m in modifiers):
        raise InvalidActionError(
            f"click: modifiers must be a list drawn from {list(MODIFIERS)}, got {modifiers!r}"
        )
    clean["modifiers"] = list(modifiers)
    extra: dict[str, object] = {"button": clean["button"]} if clean["button"] != "left" else {}
    if modifiers:
        extra["modifiers"] = list(modifiers)
    return clean, _call("click", clean["bid"], **extra)


def _dblclick(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    clean = {"bid": _bid(a, "dblclick"), "button": _button(a, "dblclick")}
    return clean, _with_button(clean, [clean["bid"]], "dblclick")


def _bid_only(kind: str) -> Callable[[dict[str, Any]], tuple[dict[str, Any], str]]:
    def parse(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
        bid = _bid(a, kind)
        return {"bid": bid}, _call(kind, bid)

    return parse


def _fill(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    bid, value = _bid(a, "fill"), _string(a, "value", "fill")
    return {"bid": bid, "value": value}, _call("fill", bid, value)


def _select_option(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    bid, options = _bid(a, "select_option"), a.get("options")
    valid = isinstance(options, str) or (
        isinstance(options, list) and options and all(isinstance(o, str) for o in options)
    )
    if not valid:
        raise InvalidActionError(
            f"select_option needs 'options': a string or a list of strings, got {options!r}"
        )
    return {"bid": bid, "options": options}, _call("select_option", bid, options)


def _press(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    bid, keys = _bid(a, "press"), _string(a, "key_comb", "press", allow_empty=False)
    return {"bid": bid, "key_comb": keys}, _call("press", bid, keys)


def _keyboard_press(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    key = _string(a, "key", "keyboard_press", allow_empty=False)
    return {"key": key}, _call("keyboard_press", key)


def _keyboard_type(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    text = _string(a, "text", "keyboard_type")
    return {"text": text}, _call("keyboard_type", text)


def _mouse_move(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    x, y = _number(a, "x", "mouse_move"), _number(a, "y", "mouse_move")
    return {"x": x, "y": y}, _call("mouse_move", x, y)


def _mouse_button(kind: str) -> Callable[[dict[str, Any]], tuple[dict[str, Any], str]]:
    def parse(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
        clean = {"x": _number(a, "x", kind), "y": _number(a, "y", kind), "button": _button(a, kind)}
        return clean, _with_button(clean, [clean["x"], clean["y"]], kind)

    return parse


def _goto(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    url = _string(a, "url", "goto", allow_empty=False).strip()
    return {"url": url}, _call("goto", url)


def _no_arguments(kind: str) -> Callable[[dict[str, Any]], tuple[dict[str, Any], str]]:
    def parse(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
        return {}, _call(kind)

    return parse


def _tab_focus(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
    index = a.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidActionError(f"tab_focus needs a tab 'index' (an integer >= 0), got {index!r}")
    return {"index": index}, _call("tab_focus", index)


def _text_argument(kind: str, name: str) -> Callable[[dict[str, Any]], tuple[dict[str, Any], str]]:
    def parse(a: dict[str, Any]) -> tuple[dict[str, Any], str]:
        value = _string(a, name, kind)
        return {name: value}, _call(kind, value)

    return parse


# kind -> (the arguments it accepts, its parser)
_PARSERS: dict[str, tuple[frozenset[str], Callable[[dict[str, Any]], tuple[dict[str, Any], str]]]] = {
    "noop": (frozenset({"wait_ms"}), _noop),
    "scroll": (frozenset({"delta_x", "delta_y"}), _scroll),
    "click": (frozenset({"bid", "button", "modifiers"}), _click),
    "dblclick": (frozenset({"bid", "button"}), _dblclick),
    "hover": (frozenset({"bid"}), _bid_only("hover")),
    "fill": (frozenset({"bid", "value"}), _fill),
    "select_option": (frozenset({"bid", "options"}), _select_option),
    "clear": (frozenset({"bid"}), _bid_only("clear")),
    "focus": (frozenset({"bid"}), _bid_only("focus")),
    "press": (frozenset({"bid", "key_comb"}), _press),
    "keyboard_press": (frozenset({"key"}), _keyboard_press),
    "keyboard_type": (frozenset({"text"}), _keyboard_type),
    "mouse_move": (frozenset({"x", "y"}), _mouse_move),
    "mouse_click": (frozenset({"x", "y", "button"}), _mouse_button("mouse_click")),
    "mouse_dblclick": (frozenset({"x", "y", "button"}), _mouse_button("mouse_dblclick")),
    "goto": (frozenset({"url"}), _goto),
    "go_back": (frozenset(), _no_arguments("go_back")),
    "go_forward": (frozenset(), _no_arguments("go_forward")),
    "new_tab": (frozenset(), _no_arguments("new_tab")),
    "tab_focus": (frozenset({"index"}), _tab_focus),
    "tab_close": (frozenset(), _no_arguments("tab_close")),
    "send_msg_to_user": (frozenset({"text"}), _text_argument("send_msg_to_user", "text")),
    "report_infeasible": (frozenset({"reason"}), _text_argument("report_infeasible", "reason")),
}

ACTION_KINDS = tuple(_PARSERS)
# Kinds whose argument names an element of the last observation.
BID_KINDS = frozenset(k for k, (names, _) in _PARSERS.items() if "bid" in names)


def parse_action(kind: str, arguments: dict[str, Any]) -> Action:
    """Validate a web action's shape; raise InvalidActionError with the reason if malformed."""
    if kind not in _PARSERS:
        raise InvalidActionError(f"unknown web action kind {kind!r}; expected one of {list(ACTION_KINDS)}")
    if not isinstance(arguments, dict):
        raise InvalidActionError(f"{kind}: arguments must be an object, got {type(arguments).__name__}")
    accepted, parse = _PARSERS[kind]
    extra = set(arguments) - accepted
    if extra:
        raise InvalidActionError(f"{kind}: unknown argument(s) {sorted(extra)}; it takes {sorted(accepted)}")
    clean, text = parse(arguments)
    return Action(kind=kind, arguments=clean, text=text)


ACTION_SPACE = """Write one JSON object per turn: {"action": <kind>, ...arguments}. `bid` is the id in square
brackets before an element in the accessibility tree, e.g. [12] link 'Cart'.
- {"action": "click", "bid": "12"} (optional "button": "left"|"middle"|"right", "modifiers": ["Shift", ...])
- {"action": "dblclick", "bid": "12"}; {"action": "hover", "bid": "12"}; {"action": "focus", "bid": "12"}
- {"action": "fill", "bid": "7", "value": "alice@example.com"}; {"action": "clear", "bid": "7"}
- {"action": "select_option", "bid": "9", "options": "Express"} (a list selects several)
- {"action": "press", "bid": "7", "key_comb": "Enter"}; {"action": "keyboard_press", "key": "Control+a"}
- {"action": "keyboard_type", "text": "hello"}
- {"action": "scroll", "delta_x": 0, "delta_y": 400}
- {"action": "mouse_move", "x": 100, "y": 200}; {"action": "mouse_click", "x": 100, "y": 200};
  {"action": "mouse_dblclick", "x": 100, "y": 200}
- {"action": "goto", "url": "http://shop.agentworld.test/"}; {"action": "go_back"}; {"action": "go_forward"}
- {"action": "new_tab"}; {"action": "tab_focus", "index": 0}; {"action": "tab_close"}
- {"action": "noop", "wait_ms": 500} (wait for the page)
- {"action": "send_msg_to_user", "text": "The order total is $42.50"}
- {"action": "report_infeasible", "reason": "The site has no such product"}
- stop when the task is finished: {"done": true}"""

"""Android actions as typed data: AndroidWorld's JSON action set, one object per turn.

`parse_action(kind, arguments)` checks an action's shape and fills `Action.text` with the canonical
JSON `{"action_type": ..., ...}` (keys in a fixed order), which is how a world model is shown the
action. Whether an `index` names a node of the last observation is the sandbox's business: an
action on a missing node is well formed and gets an observation with the error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from sandboxes.base import InvalidActionError
from schemas.records import Action

DIRECTIONS = ("up", "down", "left", "right")
MAX_WAIT_S = 30.0
MAX_TEXT_CHARS = 2000


def _index(arguments: dict[str, Any], kind: str) -> int:
    value = arguments.get("index")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())  # models write "3" as often as 3; the node is the same
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidActionError(
            f"{kind}: 'index' must be the [number] of a node in the screen tree, got {value!r}"
        )
    return value


def _coordinate(arguments: dict[str, Any], name: str, kind: str) -> int:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidActionError(f"{kind} needs a number {name!r} (screen pixels), got {value!r}")
    if value < 0:
        raise InvalidActionError(f"{kind}: {name!r} must be >= 0 (screen pixels), got {value!r}")
    return int(round(value))


def _target(arguments: dict[str, Any], kind: str) -> dict[str, Any]:
    """A node `index`, or a point `x`,`y`: exactly one of the two."""
    has_index = "index" in arguments
    has_point = "x" in arguments or "y" in arguments
    if has_index and has_point:
        raise InvalidActionError(f"{kind}: give either 'index' or 'x' and 'y', not both")
    if has_index:
        return {"index": _index(arguments, kind)}
    if has_point:
        return {"x": _coordinate(arguments, "x", kind), "y": _coordinate(arguments, "y", kind)}
    raise InvalidActionError(f"{kind} needs the 'index' of a node, or 'x' and 'y' screen coordinates")


def _click(kind: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda a: _target(a, kind)


def _with_index(clean: dict[str, Any], a: dict[str, Any], kind: str) -> dict[str, Any]:
    """`clean` with the node `index` the action may name (typing into, or scrolling, that node)."""
    if "index" in a:
        clean["index"] = _index(a, kind)
    return clean


def _input_text(a: dict[str, Any]) -> dict[str, Any]:
    text = a.get("text")
    if not isinstance(text, str) or not text:
        raise InvalidActionError(f"input_text needs a non-empty string 'text', got {text!r}")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidActionError(f"input_text: 'text' is {len(text)} characters; at most {MAX_TEXT_CHARS}")
    return _with_index({"text": text}, a, "input_text")


def _scroll(a: dict[str, Any]) -> dict[str, Any]:
    direction = a.get("direction")
    if direction not in DIRECTIONS:
        raise InvalidActionError(f"scroll: 'direction' must be one of {list(DIRECTIONS)}, got {direction!r}")
    return _with_index({"direction": direction}, a, "scroll")


def _swipe(a: dict[str, Any]) -> dict[str, Any]:
    return {name: _coordinate(a, name, "swipe") for name in ("x", "y", "to_x", "to_y")}


def _open_app(a: dict[str, Any]) -> dict[str, Any]:
    name = a.get("app_name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidActionError(f"open_app needs a non-empty string 'app_name', got {name!r}")
    return {"app_name": name.strip()}


def _wait(a: dict[str, Any]) -> dict[str, Any]:
    seconds = a.get("seconds", 1.0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        raise InvalidActionError(f"wait: 'seconds' must be a number, got {seconds!r}")
    if not 0 <= seconds <= MAX_WAIT_S:
        raise InvalidActionError(f"wait: 'seconds' must be between 0 and {MAX_WAIT_S:g}, got {seconds!r}")
    return {"seconds": float(seconds)}


def _nothing(a: dict[str, Any]) -> dict[str, Any]:
    return {}


# action_type -> (the arguments it accepts, its parser returning the clean arguments)
_PARSERS: dict[str, tuple[frozenset[str], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "click": (frozenset({"index", "x", "y"}), _click("click")),
    "long_press": (frozenset({"index", "x", "y"}), _click("long_press")),
    "input_text": (frozenset({"text", "index"}), _input_text),
    "scroll": (frozenset({"direction", "index"}), _scroll),
    "swipe": (frozenset({"x", "y", "to_x", "to_y"}), _swipe),
    "navigate_back": (frozenset(), _nothing),
    "navigate_home": (frozenset(), _nothing),
    "keyboard_enter": (frozenset(), _nothing),
    "open_app": (frozenset({"app_name"}), _open_app),
    "wait": (frozenset({"seconds"}), _wait),
}

ACTION_KINDS = tuple(_PARSERS)
# The order of keys in an action's canonical text.
_KEY_ORDER = ("index", "x", "y", "to_x", "to_y", "direction", "text", "app_name", "seconds")


def action_text(kind: str, arguments: dict[str, Any]) -> str:
    """The canonical JSON of an action: `{"action_type": kind, ...}` in a fixed key order."""
    ordered = {"action_type": kind, **{k: arguments[k] for k in _KEY_ORDER if k in arguments}}
    return json.dumps(ordered, ensure_ascii=False)


def parse_action(kind: str, arguments: dict[str, Any]) -> Action:
    """Validate an Android action's shape; raise InvalidActionError with the reason if malformed.

    An `action_type` key inside `arguments` (the JSON the agent wrote) is accepted when it agrees
    with `kind`.
    """
    if not isinstance(arguments, dict):
        raise InvalidActionError(f"{kind}: arguments must be an object, got {type(arguments).__name__}")
    arguments = dict(arguments)
    written = arguments.pop("action_type", kind)
    if written != kind:
        raise InvalidActionError(f"action_type {written!r} disagrees with the action kind {kind!r}")
    if kind not in _PARSERS:
        raise InvalidActionError(
            f"unknown Android action_type {kind!r}; expected one of {list(ACTION_KINDS)}"
        )
    accepted, parse = _PARSERS[kind]
    extra = set(arguments) - accepted
    if extra:
        raise InvalidActionError(
            f"{kind}: unknown argument(s) {sorted(extra)}; it takes {sorted(accepted) or 'none'}"
        )
    clean = parse(arguments)
    return Action(kind=kind, arguments=clean, text=action_text(kind, clean))


_INDEX = {"type": "integer", "minimum": 0}
_PIXEL = {"type": "number", "minimum": 0}


def _variant(kind: str, required: list[str], **properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"action_type": {"const": kind}, **properties},
        "required": ["action_type", *required],
        "additionalProperties": False,
    }


# The JSON an agent writes per turn, as JSON Schema (what parse_action accepts; parse_action also
# takes an index written as a digit string).
ACTION_SCHEMA: dict[str, Any] = {
    "oneOf": [
        *(
            {
                **_variant(kind, [], index=_INDEX, x=_PIXEL, y=_PIXEL),
                "oneOf": [{"required": ["index"]}, {"required": ["x", "y"]}],  # a node or a point
            }
            for kind in ("click", "long_press")
        ),
        _variant("input_text", ["text"], text={"type": "string", "minLength": 1}, index=_INDEX),
        _variant("scroll", ["direction"], direction={"enum": list(DIRECTIONS)}, index=_INDEX),
        _variant("swipe", ["x", "y", "to_x", "to_y"], x=_PIXEL, y=_PIXEL, to_x=_PIXEL, to_y=_PIXEL),
        *(_variant(kind, []) for kind in ("navigate_back", "navigate_home", "keyboard_enter")),
        _variant("open_app", ["app_name"], app_name={"type": "string", "minLength": 1}),
        _variant("wait", [], seconds={"type": "number", "minimum": 0, "maximum": MAX_WAIT_S}),
    ]
}

ACTION_SPACE = """Write one JSON object per turn with an "action_type". `index` is the number in square
brackets before a node of the screen tree, e.g. [12] android.widget.Button "OK"; x and y are screen pixels.
- {"action_type": "click", "index": 12} or {"action_type": "click", "x": 540, "y": 1200}
- {"action_type": "long_press", "index": 12} (or "x", "y")
- {"action_type": "input_text", "text": "alice@example.com", "index": 7} (without "index": types into
  the focused field)
- {"action_type": "scroll", "direction": "down"} ("up"|"down"|"left"|"right": the way the content moves
  into view; optional "index" scrolls inside that node)
- {"action_type": "swipe", "x": 540, "y": 1500, "to_x": 540, "to_y": 500}
- {"action_type": "navigate_back"}; {"action_type": "navigate_home"}; {"action_type": "keyboard_enter"}
- {"action_type": "open_app", "app_name": "Settings"}
- {"action_type": "wait", "seconds": 2} (at most 30)
- stop when the task is finished: {"done": true}"""

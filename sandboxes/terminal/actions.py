"""Terminal actions as data: `command` (a convenience) and `keystrokes` (the terminus form).

keystrokes arguments follow AgentWorldBench / Terminal-Bench:
    {"keystrokes": [{"keystrokes": "ls -la\\n", "duration": 0.5}, {"keystrokes": "C-c", "duration": 0.1}]}
An item that is exactly a tmux key name (C-c, M-x, Enter, Escape, Tab, Up, F5, ...) is pressed as
that key; anything else is typed literally, a newline pressing Enter.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from sandboxes.base import InvalidActionError
from schemas.records import Action

COMMAND = "command"
KEYSTROKES = "keystrokes"
ACTION_KINDS = (COMMAND, KEYSTROKES)
MAX_DURATION = 600.0
DEFAULT_DURATION = 1.0

_NAMES = (
    "Enter|Escape|Tab|BTab|BSpace|Space|Up|Down|Left|Right|Home|End|PageUp|PageDown|PPage|NPage"
    "|Insert|IC|Delete|DC|F[1-9]|F1[0-2]"
)
_KEY = re.compile(rf"(?:[CMS]-)*(?:{_NAMES})|(?:[CMS]-)+[!-~]")


def is_key_name(text: str) -> bool:
    """True if `text` is exactly one tmux key name (pressed, not typed)."""
    return _KEY.fullmatch(text) is not None


def command_action(command: str, timeout: float | None = None) -> Action:
    """Type one command line, press Enter and wait for the next prompt (or the timeout)."""
    arguments: dict[str, Any] = {"command": command}
    if timeout is not None:
        arguments["timeout"] = timeout
    return parse_action(COMMAND, arguments)


def keystrokes_action(items: list[tuple[str, float]] | list[dict[str, Any]]) -> Action:
    """Send key items in order, each followed by a wait of at most its duration (seconds)."""
    normalised: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, tuple | list) and len(item) == 2:
            normalised.append({"keystrokes": item[0], "duration": item[1]})
        else:
            normalised.append(item)  # type: ignore[arg-type]
    return parse_action(KEYSTROKES, {"keystrokes": normalised})


def _number(value: Any, what: str, upper: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidActionError(f"{what} must be a number of seconds, got {value!r}")
    if not 0 <= value <= upper:
        raise InvalidActionError(f"{what} must be between 0 and {upper} seconds, got {value}")
    return float(value)


def _render_item(keys: str, duration: float) -> str:
    shown = keys if is_key_name(keys) else json.dumps(keys, ensure_ascii=False)
    return f"{shown} ({duration:g}s)"


def parse_action(kind: str, arguments: dict[str, Any]) -> Action:
    """Validate a terminal action's shape; raise InvalidActionError with the reason if malformed."""
    if not isinstance(arguments, dict):
        raise InvalidActionError(
            f"terminal action arguments must be an object, got {type(arguments).__name__}"
        )
    if kind == COMMAND:
        extra = set(arguments) - {"command", "timeout"}
        if extra:
            raise InvalidActionError(f"command action: unknown argument(s) {sorted(extra)}")
        command = arguments.get("command")
        if not isinstance(command, str):
            raise InvalidActionError(f"command action needs a 'command' string, got {command!r}")
        if "\n" in command or "\r" in command:
            raise InvalidActionError("command action takes one line; send multi-line input as keystrokes")
        clean: dict[str, Any] = {"command": command}
        if arguments.get("timeout") is not None:
            clean["timeout"] = _number(arguments["timeout"], "command timeout", MAX_DURATION)
        return Action(kind=COMMAND, arguments=clean, text=command)
    if kind == KEYSTROKES:
        extra = set(arguments) - {"keystrokes"}
        if extra:
            raise InvalidActionError(f"keystrokes action: unknown argument(s) {sorted(extra)}")
        items = arguments.get("keystrokes")
        if not isinstance(items, list) or not items:
            raise InvalidActionError(
                "keystrokes action needs a non-empty list 'keystrokes' of {keystrokes: str, duration: number}"
            )
        clean_items = []
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("keystrokes"), str):
                raise InvalidActionError(
                    f"keystrokes item {i} must be {{keystrokes: str, duration: number}}: {item!r}"
                )
            if set(item) - {"keystrokes", "duration"}:
                raise InvalidActionError(
                    f"keystrokes item {i}: unknown field(s) {sorted(set(item) - {'keystrokes', 'duration'})}"
                )
            duration = _number(
                item.get("duration", DEFAULT_DURATION), f"keystrokes item {i} duration", MAX_DURATION
            )
            clean_items.append({"keystrokes": item["keystrokes"], "duration": duration})
        text = "; ".join(_render_item(it["keystrokes"], it["duration"]) for it in clean_items)
        return Action(kind=KEYSTROKES, arguments={"keystrokes": clean_items}, text=text)
    raise InvalidActionError(f"unknown terminal action kind {kind!r}; expected one of {list(ACTION_KINDS)}")

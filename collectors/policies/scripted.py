"""Plays a task's scripted actions in order, then ends the episode.

Task files write actions in a short form (`{"command": ...}`, `{"keystrokes": [...]}`) or the
full one (`{"kind": ..., "arguments": ...}`); a domain's `parse_action(kind, arguments)` turns
them into Actions. One that does not parse is played as an `invalid` action, so the runner records
the mistake in the task file instead of crashing.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from collectors.policies.base import Policy, invalid_action
from collectors.tasks import TaskSpec
from schemas.records import Action, Observation, Task

ActionParser = Callable[[str, dict[str, Any]], Action]


def plain_action(kind: str, arguments: dict[str, Any]) -> Action:
    """The parser for domains without one: the action as written."""
    return Action(kind=kind, arguments=dict(arguments), text=json.dumps(arguments, sort_keys=True))


def action_request(spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A task-file action in short or full form -> (kind, arguments)."""
    if "kind" in spec:
        return spec["kind"], dict(spec.get("arguments", {}))
    if "command" in spec:
        return "command", {key: spec[key] for key in ("command", "timeout") if key in spec}
    return "keystrokes", {"keystrokes": spec.get("keystrokes")}


def build_action(spec: dict[str, Any], parse: ActionParser) -> Action:
    try:
        kind, arguments = action_request(spec)
        return parse(kind, arguments)
    except (ValueError, TypeError, KeyError) as exc:  # InvalidActionError is a ValueError
        return invalid_action(json.dumps(spec, sort_keys=True), str(exc))


class ScriptedPolicy(Policy):
    """Plays `spec.actions` of the TaskSpec whose id the episode's task carries."""

    name = "scripted"

    def __init__(self, tasks: list[TaskSpec], parse_action: ActionParser | None = None) -> None:
        self._parse = parse_action or plain_action
        self._scripts = {spec.id: spec.actions for spec in tasks}
        self._queue: list[dict[str, Any]] = []

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        self._queue = list(self._scripts.get(task.id, []))

    def act(self, observation: Observation) -> Action | None:
        if not self._queue:
            return None
        return build_action(self._queue.pop(0), self._parse)

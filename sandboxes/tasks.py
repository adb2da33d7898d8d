"""Task sources: JSONL task files and the suites embedded as package data (`collectors/<domain>/tasks.jsonl`).

They live beside the sandboxes, which read a task's setup and verifier, so the OpenEnv server
(`sandboxes.serve`) loads them too; `collectors.tasks` re-exports them.

One JSON object per line::

    {"id": "grep-errors", "instruction": "Count ERROR lines in app.log",
     "setup": ["mkdir -p logs", "printf 'ERROR x\\n' > logs/app.log"],
     "actions": [{"command": "grep -c ERROR logs/app.log"}],
     "max_steps": 10, "category": "text", "metadata": {...},
     "verifier": {"kind": "command", "command": "test -f logs/count.txt"}}

Only `id` is required. A scripted action is `{"command": str, "timeout"?: number}`,
`{"keystrokes": [...]}` or `{"kind": str, "arguments": {...}}`. A malformed line is reported as a
`TaskLoadError` naming file:line and the reason; the other lines still load.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import fsspec

from schemas.records import Task


@dataclass
class TaskSpec:
    """A task as recorded in trajectories, plus the actions a scripted policy plays."""

    task: Task
    actions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.task.id


@dataclass
class TaskLoadError:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


_KNOWN_KEYS = {"id", "instruction", "setup", "actions", "max_steps", "category", "metadata", "verifier"}


def _check_action(action: Any, n: int) -> None:
    where = f"actions[{n}]"
    if not isinstance(action, dict):
        raise ValueError(f"{where} must be an object, got {type(action).__name__}")
    shapes = [key for key in ("command", "keystrokes", "kind") if key in action]
    if len(shapes) != 1:
        raise ValueError(f"{where} needs exactly one of 'command', 'keystrokes', 'kind'")
    if "command" in action:
        if not isinstance(action["command"], str) or not action["command"]:
            raise ValueError(f"{where}.command must be a non-empty string")
        timeout = action.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
            raise ValueError(f"{where}.timeout must be a number")
    elif "keystrokes" in action:
        if not isinstance(action["keystrokes"], list) or not action["keystrokes"]:
            raise ValueError(f"{where}.keystrokes must be a non-empty list")
    else:
        if not isinstance(action["kind"], str) or not action["kind"]:
            raise ValueError(f"{where}.kind must be a non-empty string")
        if not isinstance(action.get("arguments", {}), dict):
            raise ValueError(f"{where}.arguments must be an object")


def parse_task(obj: Any) -> TaskSpec:
    """One decoded JSON line -> TaskSpec; raises ValueError with the reason."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    task_id = obj.get("id")
    if not isinstance(task_id, str) or not task_id.strip():
        raise ValueError("missing or empty 'id' (a non-empty string is required)")
    unknown = sorted(set(obj) - _KNOWN_KEYS)
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(unknown)}")
    instruction = obj.get("instruction", "")
    if not isinstance(instruction, str):
        raise ValueError("'instruction' must be a string")
    setup = obj.get("setup", [])
    if not isinstance(setup, list) or not all(isinstance(s, str) for s in setup):
        raise ValueError("'setup' must be a list of shell command strings")
    max_steps = obj.get("max_steps", 0)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
        raise ValueError("'max_steps' must be a non-negative integer")
    metadata = obj.get("metadata", {})
    if not isinstance(metadata, dict):
        raise ValueError("'metadata' must be an object")
    category = obj.get("category")
    if category is not None:
        if not isinstance(category, str):
            raise ValueError("'category' must be a string")
        metadata = {**metadata, "category": category}
    verifier = obj.get("verifier", {})
    if not isinstance(verifier, dict) or (verifier and not isinstance(verifier.get("kind"), str)):
        raise ValueError("'verifier' must be an object with a string 'kind' (\"none\" says there is none)")
    actions = obj.get("actions", [])
    if not isinstance(actions, list):
        raise ValueError("'actions' must be a list")
    for n, action in enumerate(actions):
        _check_action(action, n)
    task = Task(
        id=task_id,
        instruction=instruction,
        setup=list(setup),
        max_steps=max_steps,
        metadata=metadata,
        verifier=dict(verifier),
    )
    return TaskSpec(task=task, actions=list(actions))


def parse_task_lines(lines: list[str], path: str) -> tuple[list[TaskSpec], list[TaskLoadError]]:
    specs: list[TaskSpec] = []
    errors: list[TaskLoadError] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            spec = parse_task(json.loads(line))
        except json.JSONDecodeError as exc:
            errors.append(TaskLoadError(path, number, f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        except ValueError as exc:
            errors.append(TaskLoadError(path, number, str(exc)))
            continue
        if spec.id in seen:
            errors.append(
                TaskLoadError(path, number, f"duplicate id {spec.id!r} (first on line {seen[spec.id]})")
            )
            continue
        seen[spec.id] = number
        specs.append(spec)
    return specs, errors


def load_tasks(path: str) -> tuple[list[TaskSpec], list[TaskLoadError]]:
    """Read a JSONL task file (local path or fsspec URI). Raises OSError if it cannot be read."""
    with fsspec.open(path, "r", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    return parse_task_lines(lines, path)


def embedded_tasks(domain: str = "terminal") -> list[TaskSpec]:
    """The suite shipped as `collectors/<domain>/tasks.jsonl`; it must load without errors."""
    resource = resources.files(f"collectors.{domain}").joinpath("tasks.jsonl")
    text = resource.read_text(encoding="utf-8")
    specs, errors = parse_task_lines(text.splitlines(), f"collectors/{domain}/tasks.jsonl")
    if errors:
        raise ValueError("embedded task suite is malformed: " + "; ".join(str(e) for e in errors))
    return specs

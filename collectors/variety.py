"""How varied a set of terminal trajectories is: programs invoked, error share, interactive share.

The explorer's acceptance numbers (and the benchmark's) come from here. A step "ends in error"
when the command it ran exited non-zero or timed out; a step is "interactive" when it sends keys to a
program other than the shell, or starts one (the screen before or after it is not a prompt).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from collectors.terminal.screen import SHELL, command_programs, screen_mode
from sandboxes.terminal.actions import is_key_name
from schemas.records import Action, Trajectory


def typed_line(action: Action) -> str:
    """The first line a keystrokes action types (what the shell would run on Enter)."""
    text = ""
    for item in action.arguments.get("keystrokes", []):
        keys = str(item.get("keystrokes", ""))
        if keys in ("Enter", "C-m", "C-j"):
            break
        if is_key_name(keys):
            continue
        text += keys
        if "\n" in text:
            break
    return text.split("\n", 1)[0]


def step_failed(data: dict[str, Any]) -> bool:
    code = data.get("exit_code")
    return bool(data.get("timed_out")) or (isinstance(code, int) and not isinstance(code, bool) and code != 0)


def explorer_variety(trajectories: Iterable[Trajectory]) -> dict[str, Any]:
    programs: Counter[str] = Counter()
    episodes = steps = errors = interactive = 0
    for trajectory in trajectories:
        episodes += 1
        before = screen_mode(trajectory.initial_observation.text)
        for step in trajectory.steps:
            steps += 1
            after = screen_mode(step.observation.text)
            failed = step_failed(step.observation.data)
            line = ""
            if step.action.kind == "command":
                line = str(step.action.arguments.get("command", ""))
            elif step.action.kind == "keystrokes":
                if before != SHELL or after != SHELL:
                    interactive += 1
                if before == SHELL:
                    line = typed_line(step.action)
                # The exit status is the last command's: it belongs to this step only if a
                # prompt came back after something ran (a typed line, or a program that exited).
                failed = failed and after == SHELL and (before != SHELL or bool(line.strip()))
            errors += failed
            programs.update(command_programs(line))
            before = after
    return {
        "trajectories": episodes,
        "steps": steps,
        "distinct_programs": len(programs),
        "programs": dict(programs.most_common()),
        "error_share": round(errors / steps, 4) if steps else 0.0,
        "interactive_share": round(interactive / steps, 4) if steps else 0.0,
    }

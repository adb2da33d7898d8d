"""The verification turns of a terminal `command` verifier (schemas.verification_turns).

Each check becomes one turn whose action is `check_action(check)`, the command the simulated verifier
types (`{ CHECK; } >/dev/null 2>&1 && echo PASS || echo FAIL`), and whose observation is the pane as
it would show that command: the agent's last real screen, the command typed at its prompt (wrapped at
the pane's width), the one word the wrapper prints, and the prompt again, the top lines scrolling off
as tmux scrolls them.

The word is the trusted run's: PASS exactly when the check exited 0 in `verify.run_checks`, which is
what the wrapper prints by construction. The checks are never typed into the agent's pane: the agent's
processes must be dead before anything reads the end state (a daemon it left could change a file
between a typed check and the trusted one), and its shell's own state (cwd, aliases, PROMPT_COMMAND)
must not sway the answer. So the screens are composed, from real parts, rather than captured.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from schemas.records import Observation, Step
from schemas.verification_turns import check_action, verification_turn

# A shell prompt line as capture-pane leaves it (trailing spaces trimmed): ends with `$` or `#`.
_PROMPT_RE = re.compile(r".*[$#]$")
# The marker line a screen whose output scrolled off starts with (sandbox.scrolled_off).
_SCROLLED_NOTE = "[... "


def last_prompt(screen: str) -> str | None:
    """The prompt the agent's last screen ends at, or None when it does not end at one (a program
    left running, a timed-out command's note): then no check could have been typed there."""
    lines = screen.rstrip("\n").split("\n")
    last = lines[-1] if lines else ""
    return last if _PROMPT_RE.fullmatch(last) else None


def _wrapped(line: str, width: int) -> list[str]:
    return [line[i : i + width] for i in range(0, len(line), width)] or [""]


def check_turns(
    screen: str,
    results: list[dict[str, Any]],
    *,
    width: int,
    height: int,
    first_index: int,
    started_at: datetime,
    elapsed_s: float,
) -> list[Step]:
    """One turn per check result of `run_checks` (`command`, `exit_code`, `passed`), each continuing
    the screen the one before left; [] when `screen` (the agent's last) does not end at a prompt."""
    prompt = last_prompt(screen)
    if prompt is None or not results:
        return []
    lines = screen.rstrip("\n").split("\n")
    if lines[0].startswith(_SCROLLED_NOTE):
        lines = lines[1:]  # the note belonged to the agent's step, not to the screen that follows
    turns: list[Step] = []
    for n, result in enumerate(results):
        action = check_action(result["command"])
        word = "PASS" if result["passed"] else "FAIL"
        lines = [*lines[:-1], *_wrapped(f"{prompt} {action.text}", width), word, prompt][-height:]
        observation = Observation(
            format="terminal_screen",
            text="\n".join(lines),
            data={"exit_code": 0, "check_exit_code": result["exit_code"], "composed": True},
        )
        turns.append(
            verification_turn(
                first_index + n,
                action,
                observation,
                started_at,
                elapsed_s / len(results),
                check=result["command"],
                passed=result["passed"],
            )
        )
    return turns

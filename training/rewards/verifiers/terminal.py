"""The terminal's form: a screen, which ends in a shell prompt when the command finished.

Whether it finished is read from the real screen: it ended on a prompt. Otherwise a program (a pager,
an editor, a command still running) holds the screen and any non-empty screen is well formed.
"""

from __future__ import annotations

import re

from training.rewards.verifiers.verdict import Failure

# user@host:dir$ / root@box:/# / (venv) prompts / plain "$ " "# " "> " "% " prompts, as the last line.
_PROMPT_RE = re.compile(r"^(?:\(\S+\)\s*)?(?:\S+@\S+[:\s]\S*\s?)?[$#%>]\s*$")

CHECKS = {
    "terminal.prompt": "the real command finished (its screen ends in a prompt), the prediction's does not",
}


def looks_like_prompt(line: str) -> bool:
    return bool(_PROMPT_RE.match(line.strip()))


def last_line(text: str) -> str:
    lines = [line for line in text.split("\n") if line.strip()]
    return lines[-1] if lines else ""


def terminal_failures(prediction: str, reference: str) -> list[Failure]:
    if looks_like_prompt(last_line(reference)) and not looks_like_prompt(last_line(prediction)):
        shown = last_line(prediction)[-40:]
        return [Failure("terminal.prompt", f"the screen ends in {shown!r}, not a shell prompt")]
    return []

"""Verification turns: a task's check, recorded as extra turns of the episode it checked.

A world model that was never shown a check never answers one, so a real episode's verifier records
what it asked of the environment and what the environment answered, in the form a simulated verifier
later asks the world model. The form is defined here, once, and both sides build their requests with
these functions: the real sandbox records `Verification.turns` (schema version 5), the simulated
verifier (training/simulated_verify.py) sends exactly the same actions.

Two forms:
- **A check command** (a terminal `command` verifier): one turn per check, the action the `command`
  action `check_action(check)`: the check wrapped so that only its exit status shows
  (`{ CHECK; } >/dev/null 2>&1 && echo PASS || echo FAIL`), typed in the agent's pane; the
  observation is the real screen it produced.
- **A verifier asked as a whole** (every other kind: web site state, tree checks, search answers, MCP
  state, SWE tests): one turn whose action is `verifier_action(task.verifier)` (kind `verify`, the
  verifier's own spec as its arguments) and whose observation is `verifier_observation(...)`: the
  verifier's real output and a last line `reward: <r>` that `reward_line` reads back.

Verification turns are never agent steps: they live in `outcome.verification.turns`, not in
`trajectory.steps`, so step counts, bounds, RL prompts and per-step metrics never see them. Their
`index` continues the episode's step numbering (the turn the renderer shows them as) and their
`info` carries `verification: true`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import datetime
from typing import Any

from schemas.records import Action, Observation, Step, Trajectory, Verification

# Runs the check for its exit status only, so a world model predicts one word, not the check's output.
CHECK_WRAPPER = "{{ {check}; }} >/dev/null 2>&1 && echo PASS || echo FAIL"
# The verifier kinds asked as check commands; every other kind is asked as a whole.
CHECK_COMMAND_KINDS = ("command",)
# A simulated verdict's `verifier` is this prefix + the kind: a world model's answer, never recorded as
# a verification turn (training data comes from real checks only).
SIMULATED_PREFIX = "simulated:"
VERIFY_KIND = "verify"  # the action kind of a verifier asked as a whole
VERIFICATION_FORMAT = "verification"  # the observation format of its answer
MARK = "verification"  # the `info` key that marks a verification turn
_VERDICT_RE = re.compile(r"^\s*(PASS|FAIL)\s*$")
_REWARD_RE = re.compile(r"^reward: (none|[0-9]+(?:\.[0-9]+)?)$")


def check_command(check: str) -> str:
    """The one-line command a check command is asked as (its trailing `;` dropped: `{ a;; }` is bad bash)."""
    return CHECK_WRAPPER.format(check=check.strip().rstrip(";"))


def check_action(check: str) -> Action:
    """The terminal `command` action of one check: what the real pane is typed and the model is asked."""
    command = check_command(check)
    return Action(kind="command", arguments={"command": command}, text=command)


def check_verdict(screen: str, command: str) -> bool | None:
    """PASS -> True, FAIL -> False, neither -> None: the first line that is exactly PASS or FAIL after
    the last echo of `command` on a screen (a terminal screen shows the command line, which names both
    words), or the last such line anywhere when the screen does not show the command."""
    at = screen.rfind(command)
    lines = (screen[at + len(command) :] if at >= 0 else screen).split("\n")
    found = [m.group(1) for line in lines if (m := _VERDICT_RE.match(line))]
    if not found:
        return None
    return (found[0] if at >= 0 else found[-1]) == "PASS"


def verifier_action(verifier: dict[str, Any]) -> Action:
    """The action of a verifier asked as a whole: its spec, shown as one line of sorted JSON."""
    spec = json.loads(json.dumps(verifier))  # a copy, and JSON only (as the record stores it)
    text = f"verify {json.dumps(spec, sort_keys=True)}"
    return Action(kind=VERIFY_KIND, arguments={"verifier": spec}, text=text)


def asked_as_checks(kind: str) -> bool:
    """Whether a verifier kind is asked one check command at a time (else as a whole)."""
    return kind in CHECK_COMMAND_KINDS


def records_whole_turn(verification: Verification) -> bool:
    """Whether an episode records `verification` as one whole-verifier turn: a real verifier (not a
    simulated verdict) of a kind asked as a whole, that decided (a reward; an error teaches nothing)."""
    kind = verification.verifier
    real = not kind.startswith(SIMULATED_PREFIX)
    return verification.reward is not None and real and not asked_as_checks(kind)


def verifier_observation(verification: Verification) -> Observation:
    """What a verifier asked as a whole answered: its output, then `reward: <r>` (`none` when it could
    not decide, with its error above)."""
    reward = "none" if verification.reward is None else f"{verification.reward:.4g}"
    body = verification.output.rstrip() or verification.error
    text = f"{body}\nreward: {reward}" if body else f"reward: {reward}"
    return Observation(format=VERIFICATION_FORMAT, text=text, data={"verifier": verification.verifier})


def reward_line(text: str) -> float | None:
    """The reward of a `verifier_observation` text (the last `reward:` line); None when it has none."""
    for line in reversed(text.rstrip().split("\n")):
        match = _REWARD_RE.match(line.strip())
        if match:
            return None if match[1] == "none" else min(1.0, float(match[1]))
    return None


def verification_turn(
    index: int, action: Action, observation: Observation, started_at: datetime, latency_s: float, **info: Any
) -> Step:
    """A recorded verification turn: a Step marked `info["verification"] = True`."""
    return Step(
        index=index,
        action=action,
        observation=observation,
        started_at=started_at,
        latency_s=latency_s,
        info={MARK: True, **info},
    )


def is_verification_turn(step: Step) -> bool:
    return bool(step.info.get(MARK))


def verification_turns(trajectory: Trajectory) -> list[Step]:
    """The trajectory's recorded verification turns ([] for files before schema version 5)."""
    verification = trajectory.outcome.verification
    return list(verification.turns) if verification is not None else []


def with_verification_turns(trajectory: Trajectory) -> Trajectory:
    """A view whose steps go on with the verification turns, for rendering them as turns 1..n+k; never
    store it (its steps would count them as agent steps)."""
    turns = verification_turns(trajectory)
    if not turns:
        return trajectory
    return dataclasses.replace(trajectory, steps=[*trajectory.steps, *turns])

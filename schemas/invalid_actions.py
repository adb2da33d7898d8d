"""The one convention for actions that never reach a sandbox, shared by whoever records or replays them.

A policy that cannot produce an action (an LLM reply with no JSON object) hands the runner an action
of kind `INVALID` whose arguments carry the `error`; a sandbox that refuses an action raises
`InvalidActionError`. Either way the runner records the observation the agent would see:
`invalid_action_observation(error)`, format "error", text `invalid action: <error>`. The fidelity
replays reproduce it from the recording, so they live here, importable by collectors and training.
"""

from __future__ import annotations

from schemas.records import Action, Observation

INVALID = "invalid"
INVALID_PREFIX = "invalid action: "


def invalid_action(raw: str, error: str) -> Action:
    """The action recorded for `raw` text that is not an action: kind `INVALID`, the reason in `error`."""
    return Action(kind=INVALID, arguments={"raw": raw, "error": error}, text=raw)


def invalid_action_error(action: Action) -> str:
    """The error a recorded `INVALID` action carries (what the policy failed at)."""
    return str(action.arguments.get("error", "invalid action"))


def invalid_action_observation(error: str) -> Observation:
    """The observation recorded for an action that was not run: `invalid action: <error>`."""
    return Observation(
        format="error", text=f"{INVALID_PREFIX}{error}", data={"invalid_action": True, "error": error}
    )

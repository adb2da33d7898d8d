"""The policy contract: what decides the next action of an episode.

A policy is created once per worker and reset at the start of every episode. Returning None from
`act` ends the episode (outcome `completed`). A policy that cannot produce a valid action (an LLM
reply that does not parse, say) returns an `Action` of kind `invalid` carrying the raw reply in
`arguments["raw"]` and the reason in `arguments["error"]`; the runner records it as a step
without sending it to the sandbox.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod

from schemas.invalid_actions import INVALID, invalid_action
from schemas.records import Action, Observation, Task

__all__ = ["INVALID", "Policy", "invalid_action"]


class Policy(ABC):
    name: str = ""

    @abstractmethod
    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        """Start an episode of `task` whose first observation is `observation`."""

    @abstractmethod
    def act(self, observation: Observation) -> Action | None:
        """The next action given the latest observation, or None when the episode is over."""

    def config(self) -> dict:
        """Recorded in each trajectory's `policy.config`."""
        return {}

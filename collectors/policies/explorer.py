"""What every domain's explorer (collectors/<domain>/explorer.py) shares: its knobs declared once.

An explorer is a dataclass whose fields are its knobs: each is a constructor argument (keyword or
position, in field order) and is recorded as it is in every trajectory's `policy.config`, so a knob
is written in one place instead of three (parameter, attribute, config entry). A field that is
given at construction but is no knob (the action parser, the tool lists) says so with
`field(metadata=NOT_A_KNOB)`; the per-episode state is a field with `init=False`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TypeVar

from collectors.policies.base import Policy

NOT_A_KNOB = {"knob": False}
State = TypeVar("State")


class Explorer(Policy):
    """Subclasses are `@dataclass(eq=False)`: an explorer is compared by identity, as any policy."""

    def config(self) -> dict:
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.init and f.metadata.get("knob", True)
        }  # type: ignore[arg-type]

    def started(self, state: State | None) -> State:
        """The episode state `reset` made: `act` before `reset` is the caller's error."""
        if state is None:
            raise RuntimeError(f"{type(self).__name__}.act called before reset")
        return state

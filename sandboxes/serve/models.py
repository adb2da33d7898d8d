"""The wire types of a served sandbox, as openenv-core's pydantic models (published at `/schema`).

An action is the sandbox contract's own `Action` (kind + arguments), so an agent written against
`python -m collectors.<domain>` sends the same shapes here: `{"kind": "command", "arguments":
{"command": "ls"}}` on the terminal. `{"kind": "done"}` ends the episode and asks for the task reward.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

DONE = "done"  # the action kind that ends an episode by the agent's choice


class SandboxAction(Action):
    kind: str = Field(
        description='the action kind, e.g. "command", "click", "call_tool"; "done" ends the episode'
    )
    arguments: dict[str, Any] = Field(default_factory=dict, description="the kind's arguments")


class SandboxObservation(Observation):
    """`done`, `reward` (the task verifier's, on the last observation only) and `metadata` come from
    openenv's base; `metadata` holds the task id, the verifier's details and step info."""

    text: str = Field(default="", description="what the agent sees: the canonical observation text")
    format: str = Field(default="", description="the observation format, e.g. terminal_screen, a11y_tree")
    data: dict[str, Any] = Field(default_factory=dict, description="the sandbox's structured data")
    instruction: str = Field(default="", description="the task's instruction (on reset)")
    error: str | None = Field(default=None, description="why the action was refused or the sandbox failed")
    truncated: bool = Field(default=False, description="the episode hit its step limit")
    # openenv's serialisation drops `metadata` on the wire: what a client needs travels in fields.
    task_id: str | None = Field(default=None, description="the episode's task")
    verification: dict[str, Any] | None = Field(
        default=None, description="on the last observation: the verifier's kind, reward, details and error"
    )


class SandboxState(State):
    domain: str = ""
    task_id: str | None = None
    simulated: bool = False
    environment: dict[str, Any] = Field(default_factory=dict, description="backend, image, model id")
    max_steps: int = 0
    done: bool = False
    reward: float | None = None

"""What domain-agnostic code (the LLM and replay policies, the simulator, the fidelity replays)
needs to know about a domain, looked up by its AgentWorldBench name.

Each domain package `sandboxes.<name>` (`sandboxes.desktop` for `os`) exports
`DOMAIN = DomainSpec(...)`. The lookup imports it lazily, so a user
who only collects terminal data never imports Playwright or tantivy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandboxes.base import Sandbox
from schemas.records import Action, Environment

# The domains that have a sandbox package; the other AgentWorldBench names come with their issues.
KNOWN_DOMAINS = ("terminal", "web", "search", "swe", "mcp", "os", "android")
# A domain whose package is not named after it (`sandboxes.os` would read as the standard module).
_PACKAGES = {"os": "desktop"}
# An environment config key a replay may set to run a recording under another backend ("auto" keeps
# the recorded one); the fidelity command's --backend sets it. Only the terminal has backends to choose.
REPLAY_BACKEND = "replay_backend"


@dataclass(frozen=True)
class DomainSpec:
    name: str  # the AgentWorldBench task name
    observation_format: str  # Observation.format of the sandbox's observations
    # Validates an action and fills its canonical `text`; raises sandboxes.base.InvalidActionError.
    parse_action: Callable[[str, dict[str, Any]], Action]
    # How an agent writes actions, for an LLM policy's system prompt: one JSON object per turn.
    action_space: str
    # A fresh real sandbox like the one a trajectory was recorded in (its `environment`), started
    # by the caller; used to replay recorded actions for the fidelity noise floor.
    replay_sandbox: Callable[[Environment], Sandbox]
    # What a fresh sandbox shows before the first action, when the task does not say.
    initial_text: str = ""


def domain_spec(name: str) -> DomainSpec:
    """The spec of `name`; ValueError naming the known domains when there is none."""
    if name not in KNOWN_DOMAINS:
        raise ValueError(f"no sandbox for domain {name!r}; known domains: {', '.join(KNOWN_DOMAINS)}")
    module = importlib.import_module(f"sandboxes.{_PACKAGES.get(name, name)}")
    return module.DOMAIN

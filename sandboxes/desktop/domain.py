"""The os domain's spec for domain-agnostic code (sandboxes.domains): its action space as an LLM agent
writes it, and a fresh desktop like the one a recording was made in, for fidelity replays."""

from __future__ import annotations

from sandboxes.desktop.actions import ACTION_SPACE, parse_action
from sandboxes.desktop.config import DesktopConfig
from sandboxes.desktop.sandbox import DesktopSandbox
from sandboxes.domains import SandboxHooks
from schemas.records import Environment


def recorded_config(environment: Environment) -> DesktopConfig:
    """The desktop configuration a trajectory was recorded with (its `environment.config`)."""
    recorded = environment.config
    options = {}
    for name in ("width", "height", "max_nodes", "settle_timeout"):
        if isinstance(recorded.get(name), int | float) and not isinstance(recorded.get(name), bool):
            options[name] = recorded[name]
    if isinstance(recorded.get("screenshot"), bool):
        options["screenshot"] = recorded["screenshot"]
    return DesktopConfig(**options)


def replay_sandbox(environment: Environment) -> DesktopSandbox:
    """A fresh, not yet started local desktop like the recorded one. A recording made over SSH or in
    a VM is replayed locally in bubblewrap: the replay needs no credentials and never touches the
    machine the recording came from."""
    return DesktopSandbox(recorded_config(environment))


HOOKS = SandboxHooks(
    parse_action=parse_action,
    action_space=ACTION_SPACE,
    replay_sandbox=replay_sandbox,
    initial_text="Focused: none",
)

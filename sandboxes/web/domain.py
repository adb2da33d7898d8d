"""The web domain's spec for domain-agnostic code (sandboxes.domains)."""

from __future__ import annotations

from sandboxes.domains import SandboxHooks
from sandboxes.web.actions import ACTION_SPACE, parse_action
from sandboxes.web.config import WebConfig
from sandboxes.web.sandbox import WebSandbox
from schemas.records import Environment


def replay_sandbox(environment: Environment) -> WebSandbox:
    """A fresh, not yet started sandbox like the recorded one, with its own embedded-sites server."""
    return WebSandbox(WebConfig.from_recorded(environment.config))


HOOKS = SandboxHooks(
    parse_action=parse_action,
    action_space=ACTION_SPACE,
    replay_sandbox=replay_sandbox,
    initial_text="",
)

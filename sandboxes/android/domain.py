"""The Android domain's spec for domain-agnostic code (sandboxes.domains)."""

from __future__ import annotations

from sandboxes.android.actions import ACTION_SPACE, parse_action
from sandboxes.android.config import AndroidConfig
from sandboxes.android.sandbox import AndroidSandbox
from sandboxes.domains import SandboxHooks
from schemas.records import Environment


def replay_sandbox(environment: Environment) -> AndroidSandbox:
    """A fresh, not yet started sandbox like the recorded one, with an Appium server of its own.

    A recording from a real device replays on the UiAutomator2 driver of whatever device the
    config's capabilities name; a fake-driver recording replays on the fake driver."""
    return AndroidSandbox(AndroidConfig.from_recorded(environment.config))


HOOKS = SandboxHooks(
    parse_action=parse_action,
    action_space=ACTION_SPACE,
    replay_sandbox=replay_sandbox,
    initial_text="",
)

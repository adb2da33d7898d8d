"""The Android domain: emulator fleets driven through Appium (UiAutomator2); tested here with Appium's
fake driver and a stand-in emulator, since no emulator can run on our machines."""

from sandboxes.android.actions import ACTION_KINDS, ACTION_SCHEMA, ACTION_SPACE, action_text, parse_action
from sandboxes.android.config import FAKE, UIAUTOMATOR2, AndroidConfig
from sandboxes.android.domain import DOMAIN, replay_sandbox
from sandboxes.android.observe import FORMAT
from sandboxes.android.sandbox import AndroidSandbox
from sandboxes.android.server import AppiumServer
from sandboxes.android.tree import Node, Screen, parse_screen, render

__all__ = [
    "ACTION_KINDS",
    "ACTION_SCHEMA",
    "ACTION_SPACE",
    "DOMAIN",
    "FAKE",
    "FORMAT",
    "UIAUTOMATOR2",
    "AndroidConfig",
    "AndroidSandbox",
    "AppiumServer",
    "Node",
    "Screen",
    "action_text",
    "parse_action",
    "parse_screen",
    "render",
    "replay_sandbox",
]

"""The OS domain: real Linux desktops (Xvfb, AT-SPI, real applications) locally, over SSH and in QEMU."""

from sandboxes.desktop.actions import (
    ACTION_KINDS,
    ACTION_SCHEMA,
    ACTION_SPACE,
    COMPUTER,
    COMPUTER_ACTIONS,
    PYAUTOGUI,
    parse_action,
    to_pyautogui,
)
from sandboxes.desktop.config import APPLICATIONS, DesktopConfig
from sandboxes.desktop.domain import HOOKS, replay_sandbox
from sandboxes.desktop.sandbox import OBSERVATION_FORMAT, DesktopSandbox

__all__ = [
    "ACTION_KINDS",
    "ACTION_SCHEMA",
    "ACTION_SPACE",
    "APPLICATIONS",
    "COMPUTER",
    "COMPUTER_ACTIONS",
    "HOOKS",
    "OBSERVATION_FORMAT",
    "PYAUTOGUI",
    "DesktopConfig",
    "DesktopSandbox",
    "parse_action",
    "replay_sandbox",
    "to_pyautogui",
]

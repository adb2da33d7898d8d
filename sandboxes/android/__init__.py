"""The Android domain: emulator fleets driven through Appium (UiAutomator2); tested here with Appium's
fake driver and a stand-in emulator, since no emulator can run on our machines."""

import importlib

from sandboxes.android.actions import ACTION_KINDS, ACTION_SCHEMA, ACTION_SPACE, action_text, parse_action
from sandboxes.android.config import FAKE, UIAUTOMATOR2, AndroidConfig
from sandboxes.android.server import AppiumServer
from sandboxes.android.tree import Node, Screen, parse_screen, render

# These need the Appium client (the `android` extra), so they load on first use: the text form of
# a screen (tree_text.py) serves training's fidelity metrics, which must not need Appium.
_WITH_APPIUM = {
    "HOOKS": "domain",
    "replay_sandbox": "domain",
    "FORMAT": "observe",
    "AndroidSandbox": "sandbox",
}


def __getattr__(name: str) -> object:
    if name not in _WITH_APPIUM:
        raise AttributeError(f"module 'sandboxes.android' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"sandboxes.android.{_WITH_APPIUM[name]}")
    except ModuleNotFoundError as exc:
        hint = f"sandboxes.android.{name} needs {exc.name}: pip install 'agentworld-data[android]'"
        raise ModuleNotFoundError(hint, name=exc.name) from exc
    return getattr(module, name)


__all__ = [
    "ACTION_KINDS",
    "ACTION_SCHEMA",
    "ACTION_SPACE",
    "HOOKS",
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

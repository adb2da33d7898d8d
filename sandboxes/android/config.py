"""Android sandbox configuration: which Appium driver, which app, what the observation holds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

UIAUTOMATOR2 = "UiAutomator2"
FAKE = "Fake"
DRIVERS = (UIAUTOMATOR2, FAKE)


@dataclass
class AndroidConfig:
    """How an Android sandbox runs. Recorded in each trajectory's environment."""

    # UiAutomator2 drives a real emulator or device; Fake is Appium's fake driver on an app XML
    # (the tests' and the benchmark's stand-in for a device, since no emulator runs on our machines).
    automation_name: str = UIAUTOMATOR2
    # Fake: the app XML path a task without its own app runs. UiAutomator2: an .apk to install, or "".
    app: str = ""
    # UiAutomator2: the app a task without `app_package` starts in ("" leaves the home screen).
    app_package: str = ""
    app_activity: str = ""
    # open_app's names: a label an agent writes ("Settings") -> the package it opens. A name that
    # looks like a package (has a dot) opens that package.
    apps: dict[str, str] = field(default_factory=dict)
    # An emulator snapshot a reset reloads when clearing the app's data is not enough (the task
    # names no package, or clearing failed); "" for none.
    snapshot: str = ""
    adb_program: str = "adb"
    screenshots: bool = True  # a PNG attachment per observation
    max_nodes: int = 300
    # How long Appium keeps an idle session (appium:newCommandTimeout); between episodes a
    # collector may think for a while.
    new_command_timeout_s: int = 600
    # The bound on one HTTP command to the Appium server (a session start with an .apk install is
    # the longest).
    command_timeout_s: float = 120.0
    # How long a reset's snapshot reload may take.
    snapshot_timeout_s: float = 120.0
    long_press_ms: int = 1000
    swipe_ms: int = 400
    # Extra capabilities merged over the ones the sandbox writes (e.g. {"appium:avd": ...}).
    capabilities: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.automation_name not in DRIVERS:
            raise ValueError(f"automation_name must be one of {list(DRIVERS)}, got {self.automation_name!r}")
        if self.max_nodes < 1 or self.long_press_ms < 0 or self.swipe_ms < 0:
            raise ValueError("max_nodes must be positive, long_press_ms and swipe_ms >= 0")

    @property
    def fake(self) -> bool:
        return self.automation_name == FAKE

    def recorded(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_recorded(cls, config: dict[str, Any]) -> AndroidConfig:
        """A config like a recorded one; unknown keys (from other versions) are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in config.items() if k in names})

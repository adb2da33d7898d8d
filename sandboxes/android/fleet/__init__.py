"""The Android emulator fleet: plan against the host, boot headless in staged batches, watch, restart, stop.

Written for the real SDK `emulator` and `adb`; tested here against the stand-ins in
tests/sandboxes/android/standin/, since no emulator can run on our machines.
"""

from sandboxes.android.fleet.device import (
    BootTimeoutError,
    Device,
    EmulatorCrashedError,
    FleetError,
    FleetResourceError,
)
from sandboxes.android.fleet.fleet import BootFailure, DeviceHealth, EmulatorFleet, FleetConfig, running_fleet
from sandboxes.android.fleet.resources import DEFAULT_BUDGET, EmulatorBudget, ResourcePlan
from sandboxes.android.fleet.sdk import clone_avd, create_avd, list_avds

__all__ = [
    "DEFAULT_BUDGET",
    "BootFailure",
    "BootTimeoutError",
    "Device",
    "DeviceHealth",
    "EmulatorBudget",
    "EmulatorCrashedError",
    "EmulatorFleet",
    "FleetConfig",
    "FleetError",
    "FleetResourceError",
    "ResourcePlan",
    "clone_avd",
    "create_avd",
    "list_avds",
    "running_fleet",
]

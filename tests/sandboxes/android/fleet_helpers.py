"""Shared set-up for the fleet tests: an AVD home with one AVD, a state directory for the stand-ins, and a
FleetConfig pointing at the stand-in SDK (tests/sandboxes/android/standin/sdk), never at a real one."""

from __future__ import annotations

import os
from pathlib import Path

from sandboxes.android.fleet import EmulatorBudget, FleetConfig
from sandboxes.android.fleet.sdk import read_ini, write_ini
from sandboxes.checks import proc_files

STANDIN_SDK = Path(__file__).parent / "standin" / "sdk"
# What one stand-in emulator (a small Python process and a `sleep`) takes, so that 64 of them fit here.
STANDIN_BUDGET = EmulatorBudget(
    cores=0.01, memory_mib=32, disk_mib=1, needs_kvm=False, source="stand-in emulator (tests only)"
)


def make_avd(home: Path, name: str, **config: str) -> Path:
    """An AVD as avdmanager lays it out: `<name>.ini` with path=, and `<name>.avd/config.ini`."""
    avd = home / f"{name}.avd"
    avd.mkdir(parents=True)
    write_ini(avd / "config.ini", {"AvdId": name, "hw.ramSize": "2048", "abi.type": "x86_64", **config})
    write_ini(home / f"{name}.ini", {"avd.ini.encoding": "UTF-8", "path": str(avd), "target": "android-34"})
    return avd


def set_avd_config(home: Path, name: str, **config: str) -> None:
    path = home / f"{name}.avd" / "config.ini"
    write_ini(path, {**read_ini(path), **config})


def fleet_config(tmp: Path, avd: str = "base", boot_s: float = 0.5, **overrides: object) -> FleetConfig:
    values: dict = {
        "avd": avd,
        "sdk": str(STANDIN_SDK),
        "avd_home": str(tmp / "avd"),
        "work_dir": str(tmp / "work"),
        "budget": STANDIN_BUDGET,
        "poll_interval_s": 0.1,
        "boot_timeout_s": 30.0,
        "env": {"STANDIN_ANDROID_STATE": str(tmp / "state"), "STANDIN_BOOT_S": str(boot_s)},
    }
    values.update(overrides)
    return FleetConfig(**values)


def standin_processes(state: Path) -> list[int]:
    """Every live process (the stand-in emulators and their children) started for this state directory."""
    marker = f"STANDIN_ANDROID_STATE={state}".encode()
    found = []
    for pid, (environ, stat) in proc_files("environ", "stat"):
        zombie = stat.rsplit(b")", 1)[1].split()[0] == b"Z"
        if marker in environ.split(b"\0") and not zombie and pid != os.getpid():
            found.append(pid)
    return found

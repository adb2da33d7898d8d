"""Installing the Appium server and its drivers from npm into the cache.

Layout under `<cache>/appium`: the pinned `appium` package as an npm prefix (`node_modules/.bin/appium`),
and `home/`, the APPIUM_HOME the server reads its drivers from, filled by `appium driver install`
(Appium's own extension installer, which records the driver in home/package.json and Appium's
manifest). A finished install writes `installed.json` naming what it installed, so a second install
is a no-op, a changed pin is reinstalled, and a half-finished one is redone.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from sandboxes.base import SandboxError
from sandboxes.cache import cache_root, entry_lock

APPIUM_VERSION = "3.8.0"
FAKE_DRIVER = "@appium/fake-driver@6.2.4"
# Only useful with a real device or emulator (it drives the device's UiAutomator2 server); installed
# on request (`--uiautomator2`).
UIAUTOMATOR2_DRIVER = "appium-uiautomator2-driver@8.7.0"
MARKER = "installed.json"
INSTALL_TIMEOUT_S = 900.0


def appium_root() -> Path:
    return cache_root() / "appium"


def appium_home() -> Path:
    """The APPIUM_HOME the server runs with."""
    return appium_root() / "home"


def appium_program() -> Path:
    return appium_root() / "node_modules" / ".bin" / "appium"


def installed() -> dict[str, str]:
    """What the cache holds: {"appium": version, "<driver package>": version}; {} when nothing."""
    try:
        marker = json.loads((appium_root() / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return marker if isinstance(marker, dict) and appium_program().exists() else {}


def _wanted(uiautomator2: bool) -> dict[str, str]:
    wanted = {"appium": APPIUM_VERSION}
    for spec in (FAKE_DRIVER, UIAUTOMATOR2_DRIVER) if uiautomator2 else (FAKE_DRIVER,):
        name, _, version = spec.rpartition("@")
        wanted[name] = version
    return wanted


def is_installed(uiautomator2: bool = False) -> bool:
    have = installed()
    return all(have.get(name) == version for name, version in _wanted(uiautomator2).items())


def install(uiautomator2: bool = False, timeout_s: float = INSTALL_TIMEOUT_S) -> bool:
    """Install Appium and the fake driver (and UiAutomator2 when asked) unless they are there.

    True when this call installed something; SandboxError saying what failed. A lock file
    serialises installs, so parallel test runs and the CLI never build the directory at once.
    """
    if is_installed(uiautomator2):
        return False
    lock = appium_root().with_name("appium.lock")
    busy = SandboxError(f"another Appium install held {lock} for {timeout_s:.0f} s")
    with entry_lock(lock, timeout_s, busy):
        if is_installed(uiautomator2):
            return False
        _install(_wanted(uiautomator2), timeout_s)
    return True


def _run(argv: list[str], what: str, timeout_s: float, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise SandboxError(f"{what} took more than {timeout_s:.0f} s") from None
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip())[-2000:]
        raise SandboxError(f"{what} failed (exit {done.returncode}): {tail}")


def _install(wanted: dict[str, str], timeout_s: float) -> None:
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise SandboxError(
            "cannot install Appium: node and npm are needed (Node 20.19+; apt-get install nodejs npm)"
        )
    root, home = appium_root(), appium_home()
    have = installed()
    (root / MARKER).unlink(missing_ok=True)
    if have.get("appium") != wanted["appium"]:
        shutil.rmtree(root, ignore_errors=True)  # a half-finished or differently pinned install
        root.mkdir(parents=True)
        have = {}
        npm = ["npm", "install", "--prefix", str(root), "--no-audit", "--no-fund", "--silent"]
        _run([*npm, f"appium@{wanted['appium']}"], f"npm install appium@{wanted['appium']}", timeout_s)
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "APPIUM_HOME": str(home)}
    for name, version in wanted.items():
        if name == "appium" or have.get(name) == version:
            continue
        if have.get(name):  # another version: Appium refuses to install over it
            _run(
                [str(appium_program()), "driver", "uninstall", _driver_name(name)],
                f"uninstall {name}",
                timeout_s,
                env,
            )
        argv = [str(appium_program()), "driver", "install", "--source=npm", f"{name}@{version}"]
        _run(argv, f"appium driver install {name}@{version}", timeout_s, env)
        have[name] = version
    have["appium"] = wanted["appium"]
    (root / MARKER).write_text(json.dumps(have, indent=1) + "\n")


def _driver_name(package: str) -> str:
    """Appium's short name of a driver package (what `appium driver uninstall` takes)."""
    return {"@appium/fake-driver": "fake", "appium-uiautomator2-driver": "uiautomator2"}.get(package, package)

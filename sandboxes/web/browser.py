"""Starting Debian's Chromium under Playwright, and finding its process for the leak check.

Playwright's sync API allows one driver per thread, so the sandboxes of a thread share it (counted
references; the last one out stops it) and each launches its own browser from it.

Playwright does not expose the browser's process id. Each browser is launched with a switch that
names it (`--agentworld-browser=<uuid>`, which Chromium ignores); its main process is the one
carrying that switch whose parent does not.
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from dataclasses import dataclass

from playwright.sync_api import Browser, Playwright, sync_playwright

from sandboxes.base import SandboxError
from sandboxes.checks import process_exists
from sandboxes.web.config import CHROMIUM_ARGS, SITE_DOMAIN, WebConfig

_drivers = threading.local()


def _acquire_driver() -> Playwright:
    if getattr(_drivers, "playwright", None) is None:
        _drivers.playwright = sync_playwright().start()
        _drivers.users = 0
    _drivers.users += 1
    return _drivers.playwright


def _release_driver() -> None:
    _drivers.users -= 1
    if _drivers.users == 0:
        playwright, _drivers.playwright = _drivers.playwright, None
        playwright.stop()


@dataclass
class LaunchedBrowser:
    browser: Browser
    pid: int  # Chromium's main process
    released: bool = False

    def pids(self) -> list[int]:
        return [self.pid] if self.pid > 0 else []

    def dead(self) -> bool:
        return not process_exists(self.pid) or not self.browser.is_connected()

    def kill(self) -> None:
        """SIGKILL the browser: safe from any thread, unlike Playwright's own calls."""
        if self.pid > 0 and process_exists(self.pid):
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def release(self) -> None:
        """Close the browser (from its own thread) and drop this browser's use of the driver."""
        if self.released:
            return
        self.released = True
        try:
            if not self.dead():
                self.browser.close()
        except Exception:  # noqa: BLE001 - a browser that died meanwhile is killed below either way
            pass
        finally:
            self.kill()
            _release_driver()


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def find_browser_pid(marker: str) -> int:
    """The main process of the Chromium launched with `marker`; 0 if there is none."""
    marked = {int(p) for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(int(p))}
    return next((pid for pid in marked if _parent(pid) not in marked), 0)


def browser_args(config: WebConfig, sites_port: int, marker: str) -> list[str]:
    return [
        *CHROMIUM_ARGS,
        # The embedded sites' stable names lead to this run's server; every other name resolves
        # normally, and each context's proxy settings decide what may be reached (web/guard.py).
        f"--host-resolver-rules=MAP *.{SITE_DOMAIN} 127.0.0.1:{sites_port}",
        # WebRTC sends UDP (STUN, data channels) around every proxy: a page could reach any host
        # with it. This policy keeps WebRTC to proxied TCP, which the guard's proxy refuses.
        "--webrtc-ip-handling-policy=disable_non_proxied_udp",
        # The sites are plain http on loopback names; no proxy from the environment may take them.
        f"--proxy-bypass-list=*.{SITE_DOMAIN};127.0.0.1;localhost",
        marker,
    ]


def launch(config: WebConfig, sites_port: int) -> LaunchedBrowser:
    """Start one headless Chromium from this thread's Playwright driver; never downloads a browser."""
    if not os.path.exists(config.executable_path):
        raise FileNotFoundError(
            f"Chromium not found at {config.executable_path}: install it with `apt-get install chromium` "
            "(never `playwright install`, which downloads a browser)"
        )
    marker = f"--agentworld-browser={uuid.uuid4().hex}"
    playwright = _acquire_driver()
    try:
        browser = playwright.chromium.launch(
            executable_path=config.executable_path,
            headless=config.headless,
            args=browser_args(config, sites_port, marker),
            timeout=30_000,
        )
    except BaseException:
        _release_driver()
        raise
    pid = find_browser_pid(marker)
    if pid == 0:  # without its pid the sandbox could neither check nor clean up after it
        try:
            browser.close()
        finally:
            _release_driver()
        raise SandboxError(f"Chromium started but its process (marked {marker}) was not found in /proc")
    return LaunchedBrowser(browser, pid)

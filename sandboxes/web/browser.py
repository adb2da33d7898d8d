"""Starting Debian's Chromium under Playwright, and finding its processes for the leak check.

Playwright does not expose the browser's process id. Each browser is launched with a switch that
names it (`--agentworld-browser=<uuid>`, which Chromium ignores); its main process is the one
carrying that switch whose parent does not, and that parent is Playwright's driver.
"""

from __future__ import annotations

import os
import signal
import uuid
from dataclasses import dataclass

from playwright.sync_api import Browser, Playwright, sync_playwright

from sandboxes.checks import process_exists
from sandboxes.web.config import CHROMIUM_ARGS, SITE_DOMAIN, WebConfig


@dataclass
class LaunchedBrowser:
    playwright: Playwright
    browser: Browser
    pid: int  # Chromium's main process
    driver_pid: int  # Playwright's node driver, the browser's parent

    def pids(self) -> list[int]:
        return [pid for pid in (self.pid, self.driver_pid) if pid > 0]

    def dead(self) -> bool:
        return not process_exists(self.pid) or not self.browser.is_connected()

    def kill(self) -> None:
        """SIGKILL both processes: safe from any thread, unlike Playwright's own calls."""
        for pid in self.pids():
            if process_exists(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


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


def find_browser_pid(marker: str) -> tuple[int, int]:
    """(browser pid, its parent's pid) of the Chromium launched with `marker`; (0, 0) if none."""
    marked = {int(p) for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(int(p))}
    for pid in marked:
        parent = _parent(pid)
        if parent not in marked:
            return pid, parent
    return 0, 0


def browser_args(config: WebConfig, sites_port: int, marker: str) -> list[str]:
    return [
        *CHROMIUM_ARGS,
        # The embedded sites' stable names lead to this run's server; every other name resolves
        # normally, and request interception decides what may be reached.
        f"--host-resolver-rules=MAP *.{SITE_DOMAIN} 127.0.0.1:{sites_port}",
        # The sites are plain http on loopback names; no proxy from the environment may take them.
        f"--proxy-bypass-list=*.{SITE_DOMAIN};127.0.0.1;localhost",
        marker,
    ]


def launch(config: WebConfig, sites_port: int) -> LaunchedBrowser:
    """Start Playwright's driver and one headless Chromium; never downloads a browser."""
    if not os.path.exists(config.executable_path):
        raise FileNotFoundError(
            f"Chromium not found at {config.executable_path}: install it with `apt-get install chromium` "
            "(never `playwright install`, which downloads a browser)"
        )
    marker = f"--agentworld-browser={uuid.uuid4().hex}"
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=config.executable_path,
            headless=config.headless,
            args=browser_args(config, sites_port, marker),
            timeout=30_000,
        )
    except BaseException:
        playwright.stop()
        raise
    pid, driver_pid = find_browser_pid(marker)
    return LaunchedBrowser(playwright, browser, pid, driver_pid)

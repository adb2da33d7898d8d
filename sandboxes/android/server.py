"""One Appium server (node) for a group of devices: started on a free loopback port with its own log
file, ready when `GET /status` answers, stopped with its whole process group.

A fleet starts one per group of emulators, and each device's session carries its own
`appium:systemPort` / `appium:mjpegServerPort` (the fleet's Device ports), so the sessions of one
server never share a device-side port.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path

from sandboxes.android.install import appium_home, appium_program
from sandboxes.base import SandboxError
from sandboxes.checks import process_exists

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
# Port collisions between picking a free port and node binding it are retried this many times.
START_ATTEMPTS = 3


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class AppiumServer:
    """A real Appium server process. `start()` blocks until it answers `/status` (bounded)."""

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        base_path: str = "/",
        log_path: Path | str | None = None,
        appium_home_dir: Path | str | None = None,
        program: Path | str | None = None,
        log_level: str = "info",
        ready_timeout_s: float = READY_TIMEOUT_S,
    ) -> None:
        self.host = host
        self.requested_port = port
        self.port = port or 0
        self.base_path = "/" + base_path.strip("/")
        self.appium_home = Path(appium_home_dir or appium_home())
        self.program = Path(program or appium_program())
        self.log_level = log_level
        self.ready_timeout_s = ready_timeout_s
        self._own_log_dir: tempfile.TemporaryDirectory[str] | None = None
        if log_path is None:
            self._own_log_dir = tempfile.TemporaryDirectory(prefix="appium-")
            log_path = Path(self._own_log_dir.name) / "appium.log"
        self.log_path = Path(log_path)
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped = False  # the group was killed; its id may be reused, so never signal it again
        self._finalizer: weakref.finalize | None = None

    @property
    def url(self) -> str:
        """The server's base URL without a trailing slash, e.g. http://127.0.0.1:4723 (what
        Appium-Python-Client connects to)."""
        return f"http://{self.host}:{self.port}{self.base_path.rstrip('/')}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def resources(self) -> list[str]:
        return [f"pid:{self._process.pid}"] if self._process else []

    def start(self) -> None:
        """Start the server (idempotent); SandboxError with the log's tail when it does not come up."""
        if self.alive:
            return
        if not self.program.exists():
            raise SandboxError(
                f"Appium is not installed ({self.program} is missing); "
                "run: python -m sandboxes.android install"
            )
        for attempt in range(1, START_ATTEMPTS + 1):
            self.port = self.requested_port or free_port(self.host)
            self._spawn()
            try:
                self._wait_ready()
                return
            except SandboxError:
                self.stop()
                if self.requested_port or "EADDRINUSE" not in self.log_tail() or attempt == START_ATTEMPTS:
                    raise

    def _spawn(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            str(self.program),
            "server",
            "--address",
            self.host,
            "--port",
            str(self.port),
            "--base-path",
            self.base_path,
            "--log-level",
            self.log_level,
            "--log-no-colors",
            "--log-timestamp",
            # Task verifiers read a real device's state with `mobile: shell` (adb shell on the
            # device, never the host); no other insecure feature, and only for UiAutomator2.
            "--allow-insecure",
            "uiautomator2:adb_shell",
        ]
        env = {**os.environ, "APPIUM_HOME": str(self.appium_home)}
        with open(self.log_path, "ab") as log:
            # A process group of its own: stop() takes node and anything it spawned (adb, drivers).
            self._stopped = False
            self._process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        # Its own session keeps it from dying with us: if this object is dropped or the interpreter
        # exits without stop(), the group is killed then.
        self._finalizer = weakref.finalize(self, _signal_group, self._process.pid, signal.SIGKILL)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        status_url = f"{self.url}/status"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise SandboxError(
                    f"the Appium server exited with status {self._process.returncode} while starting; "
                    f"its log ({self.log_path}) ends with:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(status_url, timeout=2.0) as response:
                    ready = json.loads(response.read()).get("value", {}).get("ready", True)
                if ready:
                    return
            except (urllib.error.URLError, OSError, ValueError):
                pass
            time.sleep(0.1)
        raise SandboxError(
            f"the Appium server did not answer {status_url} within {self.ready_timeout_s:.0f} s; "
            f"its log ({self.log_path}) ends with:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop the server and its process group: SIGTERM, then SIGKILL after `timeout_s` (idempotent)."""
        process = self._process
        if process is None or self._stopped:
            return
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout_s)
        # Children node spawned may outlive it in the group; they go too.
        _signal_group(process.pid, signal.SIGKILL)
        self._stopped = True
        if self._finalizer is not None:
            self._finalizer.detach()
        deadline = time.monotonic() + timeout_s
        while process_exists(process.pid) and time.monotonic() < deadline:
            time.sleep(0.02)

    def kill(self) -> None:
        """Kill the server at once (what a crash looks like to its sessions)."""
        if self._process is not None and self._process.poll() is None:
            _signal_group(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=STOP_TIMEOUT_S)
            self._stopped = True
            if self._finalizer is not None:
                self._finalizer.detach()

    def close(self) -> None:
        self.stop()
        if self._own_log_dir is not None:
            self._own_log_dir.cleanup()
            self._own_log_dir = None

    def __enter__(self) -> AppiumServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

"""The Android sandbox: an Appium session (Appium-Python-Client) on a device, observed as the
compacted UI tree, the current package and activity, and a screenshot.

With a fleet, the sandbox gets its `Device` (serial and its own systemPort/mjpegServerPort) and the
group's shared `AppiumServer`; alone, it starts a server of its own and stops it on close. Resets
are cheapest first: clear the task app's data (`mobile: clearApp`) and start it, else reload an
emulator snapshot (`adb emu avd snapshot load`) and open a new session. With the fake driver a reset
is a new session on the task's app XML.
"""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from appium import webdriver
from appium.options.common.base import AppiumOptions
from appium.webdriver.client_config import AppiumClientConfig
from selenium.common.exceptions import InvalidSessionIdException, WebDriverException
from urllib3.exceptions import HTTPError as TransportError

from sandboxes.android.actions import parse_action
from sandboxes.android.config import AndroidConfig
from sandboxes.android.execute import ActionFailed, ActionRunner, server_message
from sandboxes.android.observe import observe
from sandboxes.android.server import AppiumServer
from sandboxes.android.tree import Screen
from sandboxes.android.tree_text import parse_tree
from sandboxes.android.verify import KIND as STATE_VERIFIER
from sandboxes.android.verify import evaluate
from sandboxes.base import (
    Sandbox,
    SandboxClosedError,
    SandboxCrashedError,
    SandboxError,
    StepResult,
    VerifierError,
)
from schemas.records import Action, Environment, Observation, Step, Task, Verification

# A verifier reads the whole tree: no agent sees it, so nothing is cut.
VERIFY_MAX_NODES = 5000
# Server answers that mean the session is gone (deleted, timed out, or its driver died).
_DEAD_SESSION = ("invalid session id", "session is either terminated", "not started", "no such session")


class AndroidSandbox(Sandbox):
    domain = "android"

    def __init__(
        self,
        config: AndroidConfig | None = None,
        device: Any | None = None,
        server: AppiumServer | None = None,
    ) -> None:
        self.config = config or AndroidConfig()
        self.device = device  # a sandboxes.android.fleet Device (serial, system_port, mjpeg_port)
        self._server = server
        self._own_server = server is None
        self._driver: webdriver.Remote | None = None
        self._screen = Screen(package="")
        self._app_dir: tempfile.TemporaryDirectory[str] | None = None
        self._started = self._closed = self._crashed = False
        self._typed = False  # the session has typed (the fake driver's field values may differ)
        self.last_reset = ""  # how the last reset put the device back: new-session, clear-app, snapshot

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._closed:
            raise SandboxClosedError("the Android sandbox was closed; make a new one")
        if self._started:
            return
        if self._server is None:
            self._server = AppiumServer()
        self._server.start()
        self._started = True

    @property
    def alive(self) -> bool:
        return (
            self._started
            and not self._closed
            and not self._crashed
            and self._server is not None
            and self._server.alive
        )

    @property
    def driver(self) -> webdriver.Remote:
        """The Appium session (for benchmarks and tests that read the driver's own state)."""
        if self._driver is None:
            raise SandboxClosedError("no Appium session: call reset() first")
        return self._driver

    def resources(self) -> list[str]:
        return self._server.resources() if self._own_server and self._server else []

    def describe(self) -> Environment:
        backend = "appium-fake" if self.config.fake else "appium-uiautomator2"
        return Environment(name="android", backend=backend, config=self.config.recorded())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._quit_session()
        if self._own_server and self._server is not None:
            self._server.close()
        if self._app_dir is not None:
            self._app_dir.cleanup()
            self._app_dir = None

    # -- episodes --------------------------------------------------------------------------------

    def reset(self, task: Task) -> Observation:
        self._require_started()
        assert self._server is not None
        if not self._server.alive:
            if not self._own_server:
                raise SandboxCrashedError("the shared Appium server is down; the fleet must restart it")
            self._server.start()  # our own server died: a fresh one, and a fresh session below
            self._driver = None
        self._crashed = False
        with _CrashGuard(self):
            if self.config.fake:
                self._quit_session()
                app = self._fake_app(task)
                try:
                    self._new_session(app)
                except WebDriverException as exc:
                    if _session_dead(exc) or not self._server.alive:
                        raise
                    raise ValueError(
                        f"task {task.id}: the fake driver cannot load the app XML: {server_message(exc)}"
                    ) from None
                self.last_reset = "new-session"
            else:
                try:
                    self._reset_device(task)
                except WebDriverException as exc:
                    if not _session_dead(exc):
                        raise
                    # The kept session expired between episodes (newCommandTimeout): one fresh try.
                    self._driver = None
                    self._reset_device(task)
            return self._observe("")

    def step(self, action: Action) -> StepResult:
        self._require_started()
        if self._crashed:
            raise SandboxCrashedError("the Appium session died; reset() starts a new one")
        if self._driver is None:
            raise SandboxClosedError("reset() must be called before step()")
        action = parse_action(action.kind, action.arguments)
        with _CrashGuard(self):
            error = ""
            self._typed = self._typed or action.kind == "input_text"
            try:
                ActionRunner(self._driver, self._screen, self.config).run(action)
            except ActionFailed as exc:
                error = str(exc)
            except WebDriverException as exc:
                if _session_dead(exc):
                    raise
                error = f"{action.kind} failed: {server_message(exc)}"
            return StepResult(self._observe(error))

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        """An `android_state` verifier's checks on the screen the episode left (its tree read again,
        without a screenshot) and, on a real device, its device checks (sandboxes/android/verify.py)."""
        if task.verifier.get("kind") != STATE_VERIFIER:
            return super().verify(task, steps)
        self._require_started()
        if self._driver is None or self._crashed:
            raise SandboxClosedError("no live Appium session to verify")
        config = dataclasses.replace(self.config, screenshots=False, max_nodes=VERIFY_MAX_NODES)
        with _CrashGuard(self):
            observation, _ = observe(self._driver, config, "", self._typed)
            return evaluate(task.verifier, parse_tree(observation.text), not self.config.fake, self._shell)

    def _shell(self, command: str) -> str:
        """One `adb shell` command on the device through the session (real devices only: UiAutomator2's
        `mobile: shell`, which our Appium server allows; a server that does not refuses it)."""
        assert self._driver is not None
        try:
            output = self._driver.execute_script("mobile: shell", {"command": "sh", "args": ["-c", command]})
        except WebDriverException as exc:
            if _session_dead(exc):
                raise
            raise VerifierError(f"adb shell {command!r} failed: {server_message(exc)}") from None
        return output if isinstance(output, str) else str(output)

    # -- internals -------------------------------------------------------------------------------

    def _require_started(self) -> None:
        if self._closed or not self._started:
            raise SandboxClosedError("the Android sandbox is closed or was never started")

    def _observe(self, error: str) -> Observation:
        assert self._driver is not None
        observation, self._screen = observe(self._driver, self.config, error, self._typed)
        return observation

    def _capabilities(self, app: str) -> dict[str, Any]:
        caps: dict[str, Any] = {"appium:newCommandTimeout": self.config.new_command_timeout_s}
        if self.config.fake:
            caps.update({"platformName": "Fake", "appium:automationName": "Fake", "appium:app": app})
        else:
            caps.update(
                {
                    "platformName": "Android",
                    "appium:automationName": "UiAutomator2",
                    "appium:noReset": True,  # resets are ours: clear-app or snapshot, cheapest first
                    "appium:disableWindowAnimation": True,
                    "appium:autoGrantPermissions": True,
                }
            )
            if app:
                caps["appium:app"] = app
            if self.config.app_package:
                caps["appium:appPackage"] = self.config.app_package
            if self.config.app_activity:
                caps["appium:appActivity"] = self.config.app_activity
            if self.device is not None:
                # Each device of a server needs its own device-side ports, or sessions collide.
                caps["appium:udid"] = self.device.serial
                caps["appium:systemPort"] = self.device.system_port
                caps["appium:mjpegServerPort"] = self.device.mjpeg_port
        caps.update(self.config.capabilities)
        return caps

    def _new_session(self, app: str) -> None:
        assert self._server is not None
        self._typed = False
        # A server given as ".../" (one someone else runs) would make the client ask for "//session".
        url = self._server.url.rstrip("/")
        options = AppiumOptions().load_capabilities(self._capabilities(app))
        client = AppiumClientConfig(url, keep_alive=True, timeout=int(self.config.command_timeout_s))
        self._driver = webdriver.Remote(url, options=options, client_config=client)

    def _quit_session(self) -> None:
        driver, self._driver = self._driver, None
        if driver is None:
            return
        try:
            driver.quit()
        except (WebDriverException, TransportError, OSError):
            pass  # the session or its server is gone already

    def _fake_app(self, task: Task) -> str:
        """The task's app XML: written from `app_xml` text, or the `app` path, or the config's app."""
        metadata = task.metadata or {}
        if metadata.get("app_xml"):
            if self._app_dir is None:
                self._app_dir = tempfile.TemporaryDirectory(prefix="android-app-")
            path = Path(self._app_dir.name) / f"{hashlib.sha1(task.id.encode()).hexdigest()[:16]}.xml"
            path.write_text(str(metadata["app_xml"]))
            return str(path)
        app = str(metadata.get("app") or self.config.app)
        if not app or not Path(app).is_file():
            raise ValueError(
                f"task {task.id}: the fake driver needs an app XML (task app_xml or app, or config.app)"
            )
        return app

    def _reset_device(self, task: Task) -> None:
        metadata = task.metadata or {}
        package = str(metadata.get("app_package") or self.config.app_package)
        snapshot = str(metadata.get("snapshot") or self.config.snapshot)
        if self._driver is None:
            self._new_session(self.config.app)
        assert self._driver is not None
        if package:
            try:
                self._driver.execute_script("mobile: clearApp", {"appId": package})
                self._driver.activate_app(package)
                self.last_reset = "clear-app"
                return
            except WebDriverException as exc:
                if _session_dead(exc) or not snapshot:
                    raise
        if snapshot:
            self._load_snapshot(snapshot)
            self.last_reset = "snapshot"
            return
        self._driver.press_keycode(3)  # no app and no snapshot: start from the home screen
        self.last_reset = "home"

    def _load_snapshot(self, name: str) -> None:
        if self.device is None:
            raise SandboxError(f"snapshot {name!r}: a snapshot reload needs the fleet's device (serial)")
        self._quit_session()
        argv = [self.config.adb_program, "-s", self.device.serial, "emu", "avd", "snapshot", "load", name]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=self.config.snapshot_timeout_s
            )
        except subprocess.TimeoutExpired:
            raise SandboxCrashedError(
                f"snapshot {name!r} did not load within {self.config.snapshot_timeout_s:.0f} s"
            ) from None
        if done.returncode != 0 or "KO" in done.stdout:
            raise SandboxCrashedError(
                f"snapshot {name!r} did not load: {(done.stderr or done.stdout).strip()}"
            )
        self._new_session(self.config.app)


def _session_dead(exc: WebDriverException) -> bool:
    message = (exc.msg or "").lower()
    return isinstance(exc, InvalidSessionIdException) or any(marker in message for marker in _DEAD_SESSION)


class _CrashGuard:
    """Turns a driver failure outside an action into SandboxCrashedError: a lost session or server
    (connection refused, session deleted), or a session that cannot start or be observed. Failures of
    the action itself were caught before and became the observation's error."""

    def __init__(self, sandbox: AndroidSandbox) -> None:
        self.sandbox = sandbox

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or not isinstance(exc, TransportError | WebDriverException | OSError):
            return
        self.sandbox._crashed = True
        lost = isinstance(exc, TransportError | ConnectionError | OSError) or (
            isinstance(exc, WebDriverException) and _session_dead(exc)
        )
        if lost:
            self.sandbox._driver = None
        else:
            self.sandbox._quit_session()  # a session that still exists on the server is ended
        what = "the Appium session died" if lost else "the Appium session failed"
        raise SandboxCrashedError(f"{what}: {str(exc).strip().splitlines()[0]}") from exc

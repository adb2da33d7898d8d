"""One emulator process: the command line that starts it headless, the boot wait, and the kill."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sandboxes.android.fleet.adb import Adb
from sandboxes.android.fleet.device import BootTimeoutError, Device, EmulatorCrashedError
from sandboxes.android.fleet.ports import LAST_AUTO_CONSOLE_PORT, PortSet

KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class LaunchOptions:
    emulator: str
    avd: str
    env: Mapping[str, str]
    log_dir: Path
    gpu: str = "swiftshader_indirect"
    extra_args: tuple[str, ...] = ()


def emulator_argv(options: LaunchOptions, ports: PortSet) -> list[str]:
    """Headless, silent, and `-read-only` so that many instances can run one AVD at once; snapshots load
    (a quick boot when the AVD has one) but are never saved, so every instance starts from the same state."""
    if ports.console <= LAST_AUTO_CONSOLE_PORT:
        port_args = ["-port", str(ports.console)]
    else:
        port_args = ["-ports", f"{ports.console},{ports.adb}"]
    return [
        options.emulator, "-avd", options.avd, "-no-window", "-no-audio", "-no-boot-anim", "-read-only",
        "-no-snapshot-save", "-gpu", options.gpu, *port_args, "-grpc", str(ports.grpc), *options.extra_args,
    ]  # fmt: skip


def process_group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class EmulatorProcess:
    """A started emulator and its ports. It runs in its own process group, so one kill takes it all."""

    def __init__(self, options: LaunchOptions, ports: PortSet) -> None:
        self.options = options
        self.ports = ports
        self.log_path = options.log_dir / f"{ports.serial}.log"
        options.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                emulator_argv(options, ports), env=dict(options.env), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.started_at = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def device(self) -> Device:
        p = self.ports
        return Device(
            serial=p.serial, avd=self.options.avd, console_port=p.console, adb_port=p.adb, grpc_port=p.grpc,
            system_port=p.system, mjpeg_port=p.mjpeg, pid=self.pid,
        )  # fmt: skip

    def _exited(self) -> EmulatorCrashedError:
        return EmulatorCrashedError(
            f"{self.ports.serial} ({self.options.avd}) exited with status {self.proc.returncode} while "
            f"booting; its log {self.log_path} ends: {self.log_tail()}"
        )

    def wait_booted(self, adb: Adb, timeout_s: float, poll_s: float) -> Device:
        """adb sees the device, then `sys.boot_completed` is 1, then animations are off; all within timeout_s.

        Raises EmulatorCrashedError when the process exits and BootTimeoutError when time runs out; the caller
        kills the process either way.
        """
        serial = self.ports.serial
        deadline = self.started_at + timeout_s
        if not adb.wait_for_device(serial, max(0.0, deadline - time.monotonic()), self.alive):
            if not self.alive():
                raise self._exited()
            raise BootTimeoutError(
                f"{serial} ({self.options.avd}): adb did not see the device within {timeout_s:g} s"
            )
        while not adb.boot_completed(serial):
            if not self.alive():
                raise self._exited()
            if time.monotonic() + poll_s > deadline:
                raise BootTimeoutError(
                    f"{serial} ({self.options.avd}): sys.boot_completed was not 1 within {timeout_s:g} s; "
                    f"raise the boot timeout for slow hosts or check {self.log_path}"
                )
            time.sleep(poll_s)
        adb.disable_animations(serial)
        return self.device()

    def _signal_group(self, sig: signal.Signals, wait_s: float) -> bool:
        """Send sig to the process group; True once the group is gone, False if it outlives wait_s."""
        pgid = self.proc.pid  # start_new_session made the emulator its group's leader
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            self.proc.poll()  # reap the leader so that its zombie does not keep the group alive
            if not process_group_alive(pgid):
                return True
            time.sleep(0.02)
        return False

    def kill(self, grace_s: float = KILL_GRACE_S) -> None:
        """SIGTERM to the whole process group, SIGKILL after grace_s; returns when the group is gone."""
        if not self._signal_group(signal.SIGTERM, grace_s):
            self._signal_group(signal.SIGKILL, KILL_GRACE_S)
        self.proc.wait(timeout=KILL_GRACE_S)

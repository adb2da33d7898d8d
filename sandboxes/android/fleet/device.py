"""What one running emulator is to the rest of the Android domain, and the fleet's errors."""

from __future__ import annotations

from dataclasses import dataclass

from sandboxes.base import SandboxCrashedError, SandboxError


@dataclass(frozen=True)
class Device:
    """One booted emulator: its adb serial and every port that belongs to it.

    `adb_port` is always `console_port + 1` (how the emulator pairs them); `system_port` and `mjpeg_port`
    are host ports reserved for the UiAutomator2 server and its MJPEG screenshot stream, so that many
    Appium sessions on one host never collide.
    """

    serial: str
    avd: str
    console_port: int
    adb_port: int
    grpc_port: int
    system_port: int
    mjpeg_port: int
    pid: int


class FleetError(SandboxError):
    """The fleet cannot do what was asked; the message says what to change."""


class FleetResourceError(FleetError):
    """More emulators were asked for than this host's cores, memory, disk or KVM allow."""

    def __init__(self, message: str, plan: object) -> None:
        super().__init__(message)
        self.plan = plan


class BootTimeoutError(FleetError):
    """An emulator did not report `sys.boot_completed=1` within the boot timeout."""


class EmulatorCrashedError(FleetError, SandboxCrashedError):
    """An emulator process exited, or adb lost it, after it had started."""

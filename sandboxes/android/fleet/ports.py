"""Host ports for a fleet of emulators, chosen so that no two instances (nor any other program) collide.

Facts this follows (Android emulator and Appium documentation):
- the console port is even and the emulator's adb port is console + 1; `adb` names the device
  `emulator-<console>`; the emulator's own search range is 5554..5682 (64 + 1 pairs), beyond which an
  explicit `-ports <console>,<adb>` pair is needed;
- adb's server only scans 5555..5585 for emulators unless `ADB_LOCAL_TRANSPORT_MAX_PORT` raises it
  (emulators also register themselves with the server, but the scan is the fallback);
- UiAutomator2's `systemPort` defaults to the 8200..8299 range and `mjpegServerPort` to 7810 up;
- the emulator's gRPC endpoint is conventionally 8554 for the first instance.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

FIRST_CONSOLE_PORT = 5554
LAST_AUTO_CONSOLE_PORT = 5682  # the last even console port `-port` accepts; beyond it `-ports` is used
FIRST_GRPC_PORT = 8554
FIRST_SYSTEM_PORT = 8200
FIRST_MJPEG_PORT = 7810
MAX_PORT = 65535


def port_is_free(port: int) -> bool:
    """True when nothing listens on loopback `port` (IPv4, and IPv6 where the host has it).

    SO_REUSEADDR lets a port in TIME_WAIT from a stopped emulator count as free, as it will be for the
    next emulator, while a port another program listens on still fails to bind.
    """
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 on this host
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, port))
            except OSError as exc:
                if exc.errno == errno.EADDRNOTAVAIL:
                    continue  # the address family exists but has no loopback address
                return False
    return True


@dataclass(frozen=True)
class PortSet:
    """The ports of one emulator instance."""

    console: int
    grpc: int
    system: int
    mjpeg: int

    @property
    def adb(self) -> int:
        return self.console + 1

    @property
    def serial(self) -> str:
        return f"emulator-{self.console}"

    def all(self) -> tuple[int, ...]:
        return (self.console, self.adb, self.grpc, self.system, self.mjpeg)


class PortAllocator:
    """Hands out PortSets that are free on the host and not held by this fleet.

    Ports are probed when handed out; a program may still take one before the emulator binds it, which the
    fleet sees as a failed start and answers with a fresh PortSet (`release` + `allocate`).
    """

    def __init__(
        self,
        first_console: int = FIRST_CONSOLE_PORT,
        first_grpc: int = FIRST_GRPC_PORT,
        first_system: int = FIRST_SYSTEM_PORT,
        first_mjpeg: int = FIRST_MJPEG_PORT,
    ) -> None:
        if first_console % 2:
            raise ValueError(f"console ports are even; {first_console} is odd")
        self._first = {"console": first_console, "grpc": first_grpc, "system": first_system,
                       "mjpeg": first_mjpeg}  # fmt: skip
        self._held: set[int] = set()
        self.skipped: list[int] = []  # ports found busy on the host, for the plan and the tests

    def _usable(self, port: int) -> bool:
        if port in self._held:
            return False
        if port_is_free(port):
            return True
        self.skipped.append(port)
        return False

    def _next(self, first: int, step: int, width: int = 1) -> int:
        port = first
        while port + width - 1 <= MAX_PORT:
            if all(self._usable(p) for p in range(port, port + width)):
                self._held.update(range(port, port + width))
                return port
            port += step
        raise OSError(f"no free port from {first} up on 127.0.0.1")

    def allocate(self) -> PortSet:
        console = self._next(self._first["console"], 2, width=2)  # console + adb as a pair
        return PortSet(
            console=console,
            grpc=self._next(self._first["grpc"], 1),
            system=self._next(self._first["system"], 1),
            mjpeg=self._next(self._first["mjpeg"], 1),
        )

    def release(self, ports: PortSet) -> None:
        self._held.difference_update(ports.all())

    def hold(self, ports: PortSet) -> None:
        """Mark a PortSet held again (a restart keeps its device's ports when they are still free)."""
        self._held.update(ports.all())


def planned_ports(n: int) -> dict[str, tuple[int, int]]:
    """The port ranges n emulators use when none are busy: {kind: (first, last)}."""
    return {
        "console": (FIRST_CONSOLE_PORT, FIRST_CONSOLE_PORT + 2 * (n - 1)),
        "adb": (FIRST_CONSOLE_PORT + 1, FIRST_CONSOLE_PORT + 2 * (n - 1) + 1),
        "grpc": (FIRST_GRPC_PORT, FIRST_GRPC_PORT + n - 1),
        "system": (FIRST_SYSTEM_PORT, FIRST_SYSTEM_PORT + n - 1),
        "mjpeg": (FIRST_MJPEG_PORT, FIRST_MJPEG_PORT + n - 1),
    }

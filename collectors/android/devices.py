"""Handing the fleet's emulators to the collector's workers, one device per worker.

The runner makes one sandbox per worker thread and a new one after a crash. A crashed emulator
must be restarted before the next session, and that takes minutes: it happens in the sandbox's
`start()` (outside the runner's lock, which only guards making the object), through
`DeviceSandbox`, a thin wrapper that leases the worker's device, heals it when its health check
fails, and then starts the real Android sandbox on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sandboxes.android.fleet import Device, EmulatorFleet
from sandboxes.base import Sandbox, SandboxClosedError, StepResult
from schemas.records import Action, Environment, Observation, Task


class DevicePool:
    """The fleet's ready devices; each worker thread keeps the one it leased first."""

    def __init__(self, fleet: EmulatorFleet, devices: list[Device]) -> None:
        self.fleet = fleet
        self._free = list(enumerate(devices))
        self._lock = threading.Lock()
        self._local = threading.local()

    def lease(self) -> Device:
        """This thread's device (its first lease takes a free one); RuntimeError when none is free."""
        device = getattr(self._local, "device", None)
        if device is None:
            with self._lock:
                if not self._free:
                    raise RuntimeError("more workers than booted emulators: lower --emulators")
                self._local.slot, device = self._free.pop(0)
            self._local.device = device
        return device

    def slot(self) -> int:
        """The position of this thread's first device in the fleet's list (its server group)."""
        self.lease()
        return self._local.slot

    def healthy(self, device: Device) -> Device:
        """`device`, or its replacement when its emulator died or adb lost it (a restart: minutes)."""
        status = next((h for h in self.fleet.health() if h.device.serial == device.serial), None)
        if status is not None and status.ok:
            return device
        replacement = self.fleet.restart(device)
        self._local.device = replacement
        return replacement


class DeviceSandbox(Sandbox):
    """The Android sandbox on this worker's emulator, made in `start()` once the device is healthy."""

    def __init__(self, pool: DevicePool, make: Callable[[Device], Sandbox]) -> None:
        self.pool = pool
        self.make = make
        self.inner: Sandbox | None = None

    domain = "android"

    def start(self) -> None:
        if self.inner is None:
            self.inner = self.make(self.pool.healthy(self.pool.lease()))
        self.inner.start()

    def _sandbox(self) -> Sandbox:
        if self.inner is None:
            raise SandboxClosedError("the Android sandbox was not started")
        return self.inner

    def reset(self, task: Task) -> Observation:
        return self._sandbox().reset(task)

    def step(self, action: Action) -> StepResult:
        return self._sandbox().step(action)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()

    @property
    def alive(self) -> bool:
        return self.inner is not None and self.inner.alive

    def describe(self) -> Environment:
        return self._sandbox().describe()

"""EmulatorFleet: n headless emulators of one AVD, booted in staged batches, watched, restarted, stopped."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes.android.fleet.adb import Adb
from sandboxes.android.fleet.device import Device, EmulatorCrashedError, FleetError, FleetResourceError
from sandboxes.android.fleet.instance import EmulatorProcess, LaunchOptions
from sandboxes.android.fleet.ports import LAST_AUTO_CONSOLE_PORT, PortAllocator, PortSet, port_is_free
from sandboxes.android.fleet.resources import (
    DEFAULT_BUDGET,
    EmulatorBudget,
    ResourcePlan,
    make_plan,
    probe_host,
)
from sandboxes.android.fleet.sdk import avd_dir, avd_home, find_programs

log = logging.getLogger(__name__)


@dataclass
class FleetConfig:
    """How to find the SDK and the AVD, and how to boot. Paths given here win over ANDROID_SDK_ROOT."""

    avd: str
    sdk: str | None = None
    emulator_path: str | None = None
    adb_path: str | None = None
    avdmanager_path: str | None = None
    avd_home: str | None = None
    work_dir: str | None = None  # emulator logs; a fresh temporary directory when None
    batch_size: int = 8
    boot_timeout_s: float = 300.0
    poll_interval_s: float = 1.0
    budget: EmulatorBudget = DEFAULT_BUDGET
    allow_overcommit: bool = False
    gpu: str = "swiftshader_indirect"
    extra_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    start_attempts: int = 3  # per instance, when a port was taken between the probe and the emulator's bind
    first_console_port: int = 5554


@dataclass(frozen=True)
class DeviceHealth:
    device: Device
    process_alive: bool
    adb_state: str  # from `adb devices`; "missing" when adb does not list the serial

    @property
    def ok(self) -> bool:
        return self.process_alive and self.adb_state == "device"


@dataclass(frozen=True)
class BootFailure:
    avd: str
    serial: str
    error: str


class EmulatorFleet:
    def __init__(self, config: FleetConfig) -> None:
        if config.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {config.batch_size}")
        self.config = config
        self.work_dir: Path | None = Path(config.work_dir) if config.work_dir else None  # made by prepare()
        self.ports = PortAllocator(first_console=config.first_console_port)
        self.failures: list[BootFailure] = []
        self._running: dict[str, EmulatorProcess] = {}  # serial -> a booted instance
        self._booting: set[EmulatorProcess] = set()  # spawned, not yet ready: stop() must reach these too
        self._lock = threading.Lock()
        self._stopping = threading.Event()  # set by stop(): a start() in progress launches nothing more
        self._adb: Adb | None = None
        self._options: LaunchOptions | None = None

    # -- planning -------------------------------------------------------------------------------------
    def plan(self, n: int) -> ResourcePlan:
        """What n emulators need against what this host has; nothing is started (the `--dry-run` output)."""
        host = probe_host(os.environ.get("ANDROID_TMP") or tempfile.gettempdir())
        return make_plan(n, host, self.config.budget, self.config.batch_size, self.config.allow_overcommit)

    # -- starting -------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Find the SDK's emulator and adb and check the AVD exists; FleetError says what to install or
        set. start() calls it; a collector may call it first, to stop early on a host without an SDK."""
        if self._options is not None:
            return
        c = self.config
        programs = find_programs(c.sdk, c.emulator_path, c.adb_path, c.avdmanager_path)
        home = avd_home(c.avd_home)
        avd_dir(home, c.avd)  # a missing AVD stops here with the list of those that exist
        env = {**os.environ, **c.env, "ANDROID_AVD_HOME": str(home)}
        # adb's emulator scan stops at 5585 (16 instances) unless told otherwise; emulators also register
        # themselves with the adb server, this covers a server that misses the registration.
        env.setdefault("ADB_LOCAL_TRANSPORT_MAX_PORT", str(LAST_AUTO_CONSOLE_PORT + 1))
        if self.work_dir is None:  # the emulators' logs stay there after stop(), for a failure's post-mortem
            self.work_dir = Path(tempfile.mkdtemp(prefix="agentworld-emulators-"))
        self._adb = Adb(programs.adb, env)
        self._options = LaunchOptions(
            emulator=programs.emulator, avd=c.avd, env=env, log_dir=self.work_dir / "logs", gpu=c.gpu,
            extra_args=tuple(c.extra_args),
        )  # fmt: skip

    @property
    def adb(self) -> Adb:
        self.prepare()
        assert self._adb is not None
        return self._adb

    def _launch(self, ports: PortSet) -> EmulatorProcess:
        assert self._options is not None
        with self._lock:  # checked and registered under the lock that stop() takes, so none slips past it
            if self._stopping.is_set():
                self.ports.release(ports)
                raise FleetError(f"{ports.serial} not launched: the fleet is stopping")
            instance = EmulatorProcess(self._options, ports)
            self._booting.add(instance)
        return instance

    def _await(self, instance: EmulatorProcess) -> EmulatorProcess:
        """Wait for a launched emulator to be ready, then count it as running. When a port was taken by
        another program meanwhile, launch again on new ports. On failure the ports are released and the error
        raised; nothing is left running."""
        assert self._adb is not None
        c = self.config
        for attempt in range(1, c.start_attempts + 1):
            try:
                instance.wait_booted(self._adb, c.boot_timeout_s, c.poll_interval_s)
                with self._lock:  # one step, so that a concurrent stop() always finds it in one of the two
                    self._booting.discard(instance)
                    self._running[instance.ports.serial] = instance
                return instance
            except EmulatorCrashedError:
                instance.kill()
                taken = [p for p in instance.ports.all() if not port_is_free(p)]
                if not taken or attempt == c.start_attempts:
                    self._forget(instance)
                    raise
                log.warning("%s: port(s) %s taken by another program; retrying on new ports",
                            instance.ports.serial, taken)  # fmt: skip
                self._forget(instance)
                with self._lock:
                    ports = self.ports.allocate()
                instance = self._launch(ports)
            except BaseException:
                instance.kill()
                self._forget(instance)
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _forget(self, instance: EmulatorProcess) -> None:
        with self._lock:
            self._booting.discard(instance)
            self.ports.release(instance.ports)

    def _boot_batch(self, batch: list[PortSet], progress: Callable[[str], None] | None) -> list[Device]:
        # Launch the whole batch from this thread first, then wait in threads: on a busy host, launches made
        # in one tight loop start within milliseconds of each other, so the batch's boots overlap fully.
        try:
            launched = [self._launch(ports) for ports in batch]
        except FleetError:  # stop() came in between: what was launched is being killed by it
            return []

        def one(instance: EmulatorProcess) -> Device | None:
            serial = instance.ports.serial
            try:
                instance = self._await(instance)
            except FleetError as exc:
                with self._lock:
                    self.failures.append(BootFailure(self.config.avd, serial, str(exc)))
                if progress:
                    progress(f"{serial} failed: {exc}")
                return None
            if progress:
                progress(f"{instance.ports.serial} ready")
            return instance.device()

        with ThreadPoolExecutor(max_workers=len(batch), thread_name_prefix="emulator-boot") as pool:
            return [d for d in pool.map(one, launched) if d is not None]

    def start(self, n: int, progress: Callable[[str], None] | None = None) -> list[Device]:
        """Boot n emulators in batches of `batch_size` (the next batch starts when the previous one has booted
        or failed) and return the ready ones; failures are in `self.failures`.

        Raises FleetResourceError with the plan when n does not fit this host (see ResourcePlan.text()).
        """
        plan = self.plan(n)
        if plan.verdict == "refuse":
            raise FleetResourceError("refusing to start the emulator fleet:\n" + plan.text(), plan)
        if plan.verdict == "warn":
            warnings.warn("emulator fleet: " + "; ".join(plan.reasons), ResourceWarning, stacklevel=2)
        self.prepare()
        self._stopping.clear()
        ready: list[Device] = []
        try:
            for first in range(0, n, self.config.batch_size):
                if self._stopping.is_set():
                    break
                with self._lock:
                    batch = [self.ports.allocate() for _ in range(min(self.config.batch_size, n - first))]
                ready += self._boot_batch(batch, progress)
        except BaseException:
            self.stop()  # an interrupted start leaves nothing behind
            raise
        with self._lock:  # a stop() during the start has killed what was ready by then
            return [d for d in ready if d.serial in self._running]

    # -- watching -------------------------------------------------------------------------------------
    @property
    def devices(self) -> list[Device]:
        with self._lock:
            return [instance.device() for instance in self._running.values()]

    def health(self) -> list[DeviceHealth]:
        """Each running instance: is its process alive, and does adb list it as `device`?"""
        with self._lock:
            instances = list(self._running.values())
        if not instances:
            return []
        states = self.adb.devices()
        return [DeviceHealth(i.device(), i.alive(), states.get(i.ports.serial, "missing")) for i in instances]

    def restart(self, device: Device) -> Device:
        """Kill the instance behind `device` and boot a new one of the same AVD, on the same ports when
        they are free again; returns the new Device (a new pid). Raises FleetError when it does not come
        back."""
        with self._lock:
            old = self._running.pop(device.serial, None)
        if old is None:
            raise FleetError(f"{device.serial} is not part of this fleet")
        old.kill()
        ports = old.ports
        with self._lock:
            if not all(port_is_free(p) for p in ports.all()):
                self.ports.release(ports)
                ports = self.ports.allocate()
        return self._await(self._launch(ports)).device()

    def heal(self) -> list[Device]:
        """Restart every instance whose health is not ok; returns the replacements that came back."""
        replaced: list[Device] = []
        for status in self.health():
            if status.ok:
                continue
            log.warning("%s unhealthy (alive=%s, adb=%s): restarting", status.device.serial,
                        status.process_alive, status.adb_state)  # fmt: skip
            try:
                replaced.append(self.restart(status.device))
            except FleetError as exc:
                self.failures.append(BootFailure(status.device.avd, status.device.serial, str(exc)))
        return replaced

    # -- stopping -------------------------------------------------------------------------------------
    def stop(self, grace_s: float = 5.0) -> None:
        """Ask every emulator to exit through its console, then kill each process group; nothing survives."""
        with self._lock:
            self._stopping.set()
            instances = list(self._running.values()) + list(self._booting)
            self._running.clear()
        if not instances:
            return
        deadline = time.monotonic() + grace_s

        def down(instance: EmulatorProcess) -> None:
            if instance.alive() and self._adb is not None:
                self._adb.emu_kill(instance.ports.serial, timeout_s=max(0.5, grace_s / 2))
            instance.kill(grace_s=max(0.0, deadline - time.monotonic()))

        with ThreadPoolExecutor(
            max_workers=min(32, len(instances)), thread_name_prefix="emulator-stop"
        ) as pool:
            list(pool.map(down, instances))
        with self._lock:
            for instance in instances:
                self.ports.release(instance.ports)

    def __enter__(self) -> EmulatorFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def running_fleet(config: FleetConfig, n: int) -> Iterator[tuple[EmulatorFleet, list[Device]]]:
    """`with running_fleet(config, 8) as (fleet, devices): ...`, stopped on the way out whatever happens."""
    fleet = EmulatorFleet(config)
    try:
        yield fleet, fleet.start(n)
    finally:
        fleet.stop()

"""The collector's device pool on a fleet of the STAND-IN emulators (tests/sandboxes/android/standin; no
real emulator runs here), with real fake-driver Appium sessions on them: each worker thread keeps
its device, a worker more than the booted emulators is refused, and an emulator that died is
restarted before the worker's next session."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from collectors.android.devices import DevicePool, DeviceSandbox
from sandboxes.android import install
from sandboxes.android.config import FAKE, AndroidConfig
from sandboxes.android.fleet import EmulatorFleet
from sandboxes.android.sandbox import AndroidSandbox
from sandboxes.android.server import AppiumServer
from sandboxes.android.tree_text import parse_tree
from schemas.records import Task
from tests.sandboxes.android.fleet_helpers import fleet_config, make_avd, standin_processes

SETTINGS_XML = Path(__file__).parents[3] / "collectors" / "android" / "apps" / "settings.xml"


@pytest.fixture(scope="module")
def server():
    install.install()
    with AppiumServer() as appium:
        yield appium


def _in_thread(call):
    """`call()` in a thread of its own (a runner worker), its result or exception returned."""
    box: list = []

    def run() -> None:
        try:
            box.append(call())
        except Exception as exc:
            box.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=120)
    return box[0]


def test_workers_keep_their_device_and_a_dead_emulator_is_restarted(tmp_path: Path, server) -> None:
    make_avd(tmp_path / "avd", "base")
    (tmp_path / "state").mkdir()  # where the stand-ins publish their state for the stand-in adb
    fleet = EmulatorFleet(fleet_config(tmp_path, boot_s=0.2))
    try:
        devices = fleet.start(2)
        pool = DevicePool(fleet, devices)
        config = AndroidConfig(automation_name=FAKE, app=str(SETTINGS_XML), screenshots=False)
        made: list = []

        def make(device):
            made.append((threading.current_thread().name, device, pool.slot()))
            return AndroidSandbox(config, device=device, server=server)

        task = Task(id="fake-settings", instruction="Look around.")

        def episode():
            sandbox = DeviceSandbox(pool, make)
            sandbox.start()
            try:
                return sandbox.reset(task)
            finally:
                sandbox.close()

        results: list = []
        crashed = threading.Event()
        restarted = threading.Event()

        def worker() -> None:
            results.append(episode())
            crashed.wait(30)
            results.append(episode())
            restarted.set()

        first = threading.Thread(target=worker, name="worker-0")  # lives through the crash below
        first.start()
        while not made:
            time.sleep(0.05)
        old = made[0][1]
        os.kill(old.pid, signal.SIGKILL)  # the emulator dies between two episodes of its worker
        deadline = time.monotonic() + 10
        while any(h.process_alive for h in fleet.health() if h.device.serial == old.serial):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        crashed.set()
        assert restarted.wait(60)
        first.join(10)
        assert all(parse_tree(o.text).package == "com.android.settings" for o in results)
        (_, before, slot), (_, after, slot_after) = made
        assert after.pid != before.pid and after.avd == "base" and slot == slot_after == 0
        assert {h.device.pid: h.ok for h in fleet.health()}[after.pid]
        # A second worker gets the other emulator; a third finds none left.
        other = _in_thread(episode)
        assert parse_tree(other.text).nodes and made[-1][1].serial == devices[1].serial
        refused = _in_thread(episode)
        assert isinstance(refused, RuntimeError) and "lower --emulators" in str(refused)
    finally:
        fleet.stop()
    assert standin_processes(tmp_path / "state") == []

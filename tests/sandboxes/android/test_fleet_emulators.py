"""The emulator fleet against the stand-in `emulator`/`adb` (tests/sandboxes/android/standin/): no real
emulator can run on our machines. The stand-ins are real processes that listen on real ports, so port
collisions, crashes, boot timeouts and leaks are real here; only Android itself is missing."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from sandboxes.android.fleet import (
    DEFAULT_BUDGET,
    EmulatorFleet,
    FleetError,
    FleetResourceError,
    clone_avd,
    create_avd,
    list_avds,
)
from sandboxes.android.fleet.ports import port_is_free
from sandboxes.android.fleet.resources import HostResources, make_plan
from sandboxes.android.fleet.sdk import find_programs, read_ini
from tests.sandboxes.android.fleet_helpers import (
    STANDIN_SDK,
    fleet_config,
    make_avd,
    set_avd_config,
    standin_processes,
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    make_avd(tmp_path / "avd", "base")
    (tmp_path / "state").mkdir()
    return tmp_path


def assert_nothing_left(tmp: Path) -> None:
    deadline = time.monotonic() + 2.0
    while standin_processes(tmp / "state") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert standin_processes(tmp / "state") == []


def test_64_emulators_boot_in_staged_batches_with_unique_ports(home: Path) -> None:
    fleet = EmulatorFleet(fleet_config(home, boot_s=1.0, batch_size=16))
    try:
        devices = fleet.start(64)
        assert len(devices) == 64 and fleet.failures == []
        ports = [
            p for d in devices for p in (d.console_port, d.adb_port, d.grpc_port, d.system_port, d.mjpeg_port)
        ]
        assert len(set(ports)) == len(ports) == 5 * 64
        assert all(d.console_port % 2 == 0 and d.adb_port == d.console_port + 1 for d in devices)
        assert {d.serial for d in devices} == {f"emulator-{d.console_port}" for d in devices}
        assert all(h.ok for h in fleet.health())
        listed = fleet.adb.devices()
        assert all(listed[d.serial] == "device" for d in devices)
        for d in devices:  # animations were switched off on every device
            done = fleet.adb.shell(d.serial, "settings", "get", "global", "animator_duration_scale")
            assert done.stdout.strip() == "0"
        # Staged: each batch of 16 was started only after the previous batch had finished booting.
        boots = sorted(
            (json.loads(line) for line in (home / "state" / "boots.jsonl").read_text().splitlines()),
            key=lambda b: b["exec_at"],
        )
        batches = [boots[i : i + 16] for i in range(0, 64, 16)]
        for before, after in zip(batches, batches[1:], strict=False):
            assert min(b["exec_at"] for b in after) >= max(b["booted_at"] for b in before)
    finally:
        fleet.stop()
    assert_nothing_left(home)
    assert all(port_is_free(p) for p in ports)


def test_a_boot_that_never_completes_times_out_and_is_killed(home: Path) -> None:
    clone_avd(home / "avd", "base", "stuck")  # a cloned AVD, changed so that it never finishes booting
    set_avd_config(home / "avd", "stuck", **{"standin.boot_never": "yes"})
    assert (home / "avd" / "stuck.ini").read_text().count("stuck.avd") == 2  # path= and path.rel=
    fleet = EmulatorFleet(fleet_config(home, avd="stuck", boot_timeout_s=1.5, batch_size=2))
    started = time.monotonic()
    try:
        assert fleet.start(2) == []
        took = time.monotonic() - started
        assert took < 1.5 + 3.0, f"the boot wait is bounded by the timeout, took {took:.1f} s"
        assert len(fleet.failures) == 2
        assert all("sys.boot_completed was not 1 within 1.5 s" in f.error for f in fleet.failures)
        assert_nothing_left(home)
    finally:
        fleet.stop()


def test_a_crash_is_seen_and_the_instance_restarted(home: Path) -> None:
    control = home / "state" / "control"
    control.mkdir()
    (control / "5554.crash_after_s").write_text("0.1")  # this one dies while booting
    (control / "5558.crash_after_s").write_text("2.0")  # this one dies after it is ready
    fleet = EmulatorFleet(fleet_config(home, boot_s=0.5, batch_size=3))
    try:
        devices = fleet.start(3)
        assert sorted(d.console_port for d in devices) == [5556, 5558]
        [failure] = fleet.failures
        assert failure.serial == "emulator-5554" and "simulated crash" in failure.error
        crashing = next(d for d in devices if d.console_port == 5558)
        deadline = time.monotonic() + 10
        while all(h.ok for h in fleet.health()) and time.monotonic() < deadline:
            time.sleep(0.1)
        sick = [h for h in fleet.health() if not h.ok]
        assert [h.device.serial for h in sick] == ["emulator-5558"]
        assert not sick[0].process_alive and sick[0].adb_state == "missing"
        [replacement] = fleet.heal()
        assert replacement.serial == crashing.serial and replacement.pid != crashing.pid
        assert all(h.ok for h in fleet.health()) and len(fleet.devices) == 2
    finally:
        fleet.stop()
    assert_nothing_left(home)


def test_refusal_when_the_budget_exceeds_the_host(home: Path) -> None:
    small = HostResources(
        cores=16, memory_mib=65536, disk_mib=500_000, disk_path="/x", kvm=True, kvm_detail="ok"
    )
    plan = make_plan(64, small, DEFAULT_BUDGET, batch_size=8)
    assert plan.verdict == "refuse"
    assert plan.needed == {"cores": 128.0, "memory_mib": 64 * 3072, "disk_mib": 64 * 6144}
    assert plan.fits == {"cores": 8, "memory": 21, "disk": 81} and plan.max_emulators == 8
    assert "ask for at most 8" in plan.text() and "hw.ramSize 2048 MiB" in plan.text()
    assert plan.ports["console"] == (5554, 5680) and plan.ports["adb"] == (5555, 5681)
    no_kvm = HostResources(
        cores=256, memory_mib=10**6, disk_mib=10**7, disk_path="/x", kvm=False, kvm_detail="no"
    )
    assert make_plan(4, no_kvm).verdict == "refuse" and "KVM is required" in make_plan(4, no_kvm).reasons[0]
    assert make_plan(64, small, allow_overcommit=True).verdict == "warn"
    assert make_plan(7, small).verdict == "warn"  # 7 of 8 by cores: above 80%

    # On this host, with the default budget: one more emulator than fits is refused before anything starts.
    fleet = EmulatorFleet(fleet_config(home, budget=DEFAULT_BUDGET))
    too_many = fleet.plan(1).max_emulators + 1
    with pytest.raises(FleetResourceError, match="do not fit") as refused:
        fleet.start(too_many)
    assert refused.value.plan.emulators == too_many and "refusing" in str(refused.value)
    assert standin_processes(home / "state") == []


def test_busy_ports_are_skipped(home: Path) -> None:
    taken = []
    for port in (5554, 8554, 8200):  # another program's console, gRPC and UiAutomator2 ports
        sock = socket.socket()
        sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
        )  # a stopped emulator's TIME_WAIT is no owner
        sock.bind(("127.0.0.1", port))
        sock.listen()
        taken.append(sock)
    fleet = EmulatorFleet(fleet_config(home, batch_size=2))
    try:
        devices = sorted(fleet.start(2), key=lambda d: d.console_port)
        assert [d.console_port for d in devices] == [5556, 5558]
        assert 8554 not in [d.grpc_port for d in devices] and 8200 not in [d.system_port for d in devices]
        assert {5554, 8554, 8200} <= set(fleet.ports.skipped)
    finally:
        fleet.stop()
        for sock in taken:
            sock.close()
    assert_nothing_left(home)


def test_stop_during_boot_kills_every_process_group_and_launches_no_further_batch(home: Path) -> None:
    set_avd_config(home / "avd", "base", **{"standin.boot_never": "yes"})
    fleet = EmulatorFleet(fleet_config(home, boot_timeout_s=60, batch_size=4))
    result: list = []
    starter = threading.Thread(target=lambda: result.append(fleet.start(12)))
    starter.start()
    deadline = time.monotonic() + 15
    while (
        len(standin_processes(home / "state")) < 8 and time.monotonic() < deadline
    ):  # 4 emulators + children
        time.sleep(0.05)
    assert len(standin_processes(home / "state")) >= 8
    fleet.stop()
    starter.join(timeout=15)
    assert not starter.is_alive() and result == [[]]
    assert_nothing_left(home)
    launched = sorted(p.name for p in (home / "work" / "logs").iterdir())
    assert launched == [f"emulator-{port}.log" for port in (5554, 5556, 5558, 5560)]  # the first batch only


def test_missing_sdk_and_avd_say_what_to_do(home: Path, tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="Unknown|not found in .*AVDs there: base"):
        EmulatorFleet(fleet_config(home, avd="nope")).start(1)
    with pytest.raises(FleetError, match="ANDROID_SDK_ROOT"):
        EmulatorFleet(fleet_config(home, sdk=str(tmp_path / "no-sdk"))).start(1)


def test_avdmanager_creates_an_avd_the_fleet_boots(home: Path) -> None:
    avdmanager = find_programs(sdk=str(STANDIN_SDK)).avdmanager
    assert avdmanager is not None and "cmdline-tools/latest/bin/avdmanager" in avdmanager
    with pytest.raises(FleetError, match="(?s)Package path is not valid.*install the image with sdkmanager"):
        create_avd(avdmanager, "bad", "system-images;android-99;google_apis;x86_64", None, home / "avd")
    made = create_avd(
        avdmanager, "made", "system-images;android-34;google_apis;x86_64", "pixel_7", home / "avd"
    )
    config = read_ini(made / "config.ini")
    assert config["image.sysdir.1"] == "system-images/android-34/google_apis/x86_64/"
    assert config["standin.custom_hardware_answer"] == "no"  # the custom-hardware question was answered
    assert list_avds(home / "avd") == ["base", "made"]
    with EmulatorFleet(fleet_config(home, avd="made", batch_size=1)) as fleet:
        [device] = fleet.start(1)
        assert device.avd == "made"
    assert_nothing_left(home)


def test_console_ports_past_the_emulators_range_use_an_explicit_pair(home: Path) -> None:
    with EmulatorFleet(fleet_config(home, first_console_port=5680, batch_size=3)) as fleet:
        devices = sorted(fleet.start(3), key=lambda d: d.console_port)
        assert [d.console_port for d in devices] == [5680, 5682, 5684]
        argvs = [Path(f"/proc/{d.pid}/cmdline").read_bytes().split(b"\0") for d in devices]
        assert [b"-port", b"5682"] == argvs[1][argvs[1].index(b"-port") :][:2]
        assert [b"-ports", b"5684,5685"] == argvs[2][argvs[2].index(b"-ports") :][:2]
        assert all(b"-read-only" in argv and b"-no-window" in argv for argv in argvs)
    assert_nothing_left(home)


def test_a_port_taken_after_the_probe_means_a_new_launch_on_new_ports(home: Path) -> None:
    """Another program binds the adb port between the fleet's probe and the emulator's own bind: the
    emulator refuses it and exits, and the fleet launches it again on the next free pair."""
    log = home / "work" / "logs" / "emulator-5554.log"
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def take_port_once_launched() -> None:
        deadline = time.monotonic() + 20
        while (
            not log.exists() and time.monotonic() < deadline
        ):  # the fleet creates the log just before launch
            time.sleep(0.001)
        squatter.bind(("127.0.0.1", 5555))
        squatter.listen()

    watcher = threading.Thread(target=take_port_once_launched)
    watcher.start()
    try:
        with EmulatorFleet(fleet_config(home, batch_size=1)) as fleet:
            [device] = fleet.start(1)
            assert device.console_port == 5556 and fleet.failures == []
            assert "adb port 5555 is used by another program" in log.read_text()
    finally:
        watcher.join()
        squatter.close()
    assert_nothing_left(home)

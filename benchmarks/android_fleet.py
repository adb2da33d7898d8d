"""Emulator fleet overhead: 64 stand-in emulators from `fleet.start(64)` to all devices ready, against the
stand-ins' own boot times measured in the same run.

No real emulator can run on our machines, so the emulators are the stand-ins from
tests/sandboxes/android/standin/ (real processes on real ports, driven through the stand-in adb). Each
stand-in reports when it was exec'd and when it set sys.boot_completed=1, so its own boot time, interpreter
start-up included, is measured, not assumed. With staged batches the least any fleet can take is the sum,
over batches, of the slowest boot in the batch (a batch starts when the previous one is ready); the overhead
is how far the measured time goes beyond that. The stand-ins boot in BOOT_S and the fleet polls
sys.boot_completed every POLL_S: the same ratio as a 1 s poll against a 40 s real boot.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from pathlib import Path

from benchmarks.timing import show
from sandboxes.android.fleet import EmulatorFleet
from tests.sandboxes.android.fleet_helpers import fleet_config, make_avd

EMULATORS = 64
BOOT_S = 10.0
POLL_S = 0.25
BATCH_SIZES = (16, 64)
TARGET_OVERHEAD = 0.05


def _one_run(batch_size: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="android-fleet-bench-"))
    make_avd(tmp / "avd", "base")
    (tmp / "state").mkdir()
    config = fleet_config(
        tmp, boot_s=BOOT_S, batch_size=batch_size, poll_interval_s=POLL_S, boot_timeout_s=120
    )
    fleet = EmulatorFleet(config)
    cpu_before = resource.getrusage(resource.RUSAGE_SELF)
    ready_at: dict[str, float] = {}
    started = time.time()
    try:
        devices = fleet.start(
            EMULATORS, progress=lambda line: ready_at.setdefault(line.split()[0], time.time())
        )
        ready = time.time()
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        fleet.stop()
    boots = {
        b["serial"]: b for b in map(json.loads, (tmp / "state" / "boots.jsonl").read_text().splitlines())
    }
    # Batches in start order: a batch is exec'd only after the previous one is ready (the tests check this).
    order = sorted(devices, key=lambda d: boots[d.serial]["exec_at"])
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    own = [max(boots[d.serial]["booted_at"] - boots[d.serial]["exec_at"] for d in batch) for batch in batches]
    gaps = [  # from a batch's last boot to the next batch's first exec: the fleet's own time between stages
        min(boots[d.serial]["exec_at"] for d in after) - max(boots[d.serial]["booted_at"] for d in before)
        for before, after in zip(batches, batches[1:], strict=False)
    ]
    detect = [  # from a batch's slowest boot to the fleet having every device of it ready (animations off)
        max(ready_at[d.serial] for d in batch) - max(boots[d.serial]["booted_at"] for d in batch)
        for batch in batches
    ]
    spread = [  # from a batch's first exec to its last: the time the fleet takes to launch a batch
        max(boots[d.serial]["exec_at"] for d in batch) - min(boots[d.serial]["exec_at"] for d in batch)
        for batch in batches
    ]
    total = ready - started
    baseline = sum(own)
    return {
        "batch_size": batch_size,
        "ready": len(devices),
        "failures": len(fleet.failures),
        "command_to_ready_s": total,
        "standin_slowest_boot_per_batch_s": own,
        "baseline_s": baseline,
        "overhead_ratio": total / baseline - 1,
        "command_to_first_exec_s": min(b["exec_at"] for b in boots.values()) - started,
        "between_batches_s": gaps,
        "launch_spread_per_batch_s": spread,
        "last_boot_to_batch_ready_s": detect,
        "fleet_process_cpu_s": (cpu_after.ru_utime + cpu_after.ru_stime)
        - (cpu_before.ru_utime + cpu_before.ru_stime),
        # The target is for staged batches; one batch of all 64 is run beside it for comparison only.
        "met": (len(devices) == EMULATORS and total / baseline - 1 <= TARGET_OVERHEAD)
        if batch_size < EMULATORS
        else None,
    }


def android_fleet() -> dict:
    runs = [_one_run(size) for size in BATCH_SIZES]
    return {
        "emulators": EMULATORS,
        "standin_boot_s": BOOT_S,
        "poll_interval_s": POLL_S,
        "target_overhead": TARGET_OVERHEAD,
        "load_average_1m_at_end": os.getloadavg()[0],
        "runs": runs,
    }


def markdown_lines(r: dict) -> list[str]:
    lines = [
        f"{r['emulators']} stand-in emulators (own boot {r['standin_boot_s']:g} s), sys.boot_completed "
        f"polled every {r['poll_interval_s']:g} s; "
        f"load average at the end {r['load_average_1m_at_end']:.1f}.",
        "",
        "| batch size | ready | command to all ready s | sum of slowest own boot per batch s | overhead | "
        "command to first exec s | between batches s | fleet process CPU s | target <= 5% (staged) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    verdict = {True: "met", False: "NOT met", None: "comparison only"}
    for run in r["runs"]:
        gaps = ", ".join(f"{g:.2f}" for g in run["between_batches_s"]) or "-"
        lines.append(
            f"| {run['batch_size']} | {run['ready']} | {run['command_to_ready_s']:.2f} "
            f"| {run['baseline_s']:.2f} | {run['overhead_ratio'] * 100:.1f}% "
            f"| {run['command_to_first_exec_s']:.2f} | {gaps} | {run['fleet_process_cpu_s']:.1f} "
            f"| {verdict[run['met']]} |"
        )
    return lines


if __name__ == "__main__":
    show(android_fleet(), markdown_lines)

"""Desktop VM: boot time, reset-by-snapshot time, and step latency over SSH, all in one run.

Step latency compares, on the same VM in the same run:
- ours_line: one request/response line through `VmTransport` to a guest program it spawned (how the
  desktop sandbox steps: the guest agent stays up, each step is one line each way);
- ours_command: one command through our `SshTransport.run` (a fresh SSH channel per command);
- paramiko_exec: the baseline, a bare paramiko `exec_command("true")` and its exit status;
- paramiko_line: the floor, a line echoed by `cat` on a bare paramiko channel.
Boot and reset use the acceleration `auto` picks (AGENTWORLD_VM_ACCEL overrides): KVM on bare metal,
TCG (software emulation) where /dev/kvm is missing or the host is itself a VM.
"""

from __future__ import annotations

import os
import time

import paramiko

from benchmarks.timing import latency_ms
from sandboxes.desktop.vm import QemuVm, VmConfig, VmTransport
from sandboxes.desktop.vm_image import choose_accel, kvm_usable

TARGET_RATIO = 1.2


def _boot_and_resets(accel: str, starts: int = 2, resets: int = 5) -> dict:
    """A cold boot (fresh overlay, no snapshot: also what a reset costs without snapshots), then
    starts from the cached booted snapshot and `loadvm` resets. The first snapshot start of an image
    boots, saves and caches the snapshot; it is reported apart."""
    with QemuVm(VmConfig(accel=accel, snapshot_reset=False)) as vm:
        cold = vm.boot_seconds
    first: dict = {}
    restored, loadvm = [], []
    for i in range(starts + 1):
        with QemuVm(VmConfig(accel=accel)) as vm:
            if vm.start_method.startswith("booted"):
                first = {"seconds": vm.boot_seconds, "savevm_and_cache_s": vm.snapshot_seconds}
                continue
            restored.append(vm.boot_seconds)
            if i == starts:
                loadvm = [vm.reset()["seconds"] for _ in range(resets)]
    return {
        "cold_boot_s": cold,
        "first_snapshot_start": first or "the image's booted snapshot was cached before this run",
        "start_from_cached_snapshot": latency_ms(restored),
        "reset_loadvm": latency_ms(loadvm),
    }


def _paramiko_client(vm: QemuVm) -> paramiko.SSHClient:
    assert vm.dir is not None
    client = paramiko.SSHClient()
    client.load_host_keys(str(vm.dir / "known_hosts"))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        "127.0.0.1", vm.port, username="agent", key_filename=str(vm.image.path("agent_key")),
        look_for_keys=False, allow_agent=False, timeout=20,
    )  # fmt: skip
    return client


def _timed(step, n: int, warmup: int = 5) -> list[float]:
    for _ in range(warmup):
        step()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        samples.append(time.perf_counter() - t0)
    return samples


def step_latency(n: int = 200) -> dict:
    """Our transport against bare paramiko on one VM, interleaved in rounds so drift hits all alike."""
    transport = VmTransport(config=VmConfig())
    client = None
    try:
        channel = transport.spawn(["cat"], {})
        ssh = transport.ssh()
        client = _paramiko_client(transport.vm)
        bare = client.get_transport()
        assert bare is not None
        floor_chan = bare.open_session()
        floor_chan.exec_command("cat")
        floor_file = floor_chan.makefile("rb")

        def ours_line() -> None:
            channel.send_line("x" * 64)
            assert channel.recv_line(10.0) == "x" * 64

        def ours_command() -> None:
            assert ssh.run(["true"])[0] == 0

        def paramiko_exec() -> None:
            _, stdout, _ = client.exec_command("true", timeout=10)
            assert stdout.channel.recv_exit_status() == 0

        def paramiko_line() -> None:
            floor_chan.sendall(b"x" * 64 + b"\n")
            assert floor_file.readline() == b"x" * 64 + b"\n"

        steps = {
            "ours_line": ours_line,
            "ours_command": ours_command,
            "paramiko_exec": paramiko_exec,
            "paramiko_line": paramiko_line,
        }
        samples: dict[str, list[float]] = {name: [] for name in steps}
        rounds = 5
        for _ in range(rounds):
            for name, step in steps.items():
                samples[name] += _timed(step, n // rounds)
        floor_chan.close()
        result = {name: latency_ms(values) for name, values in samples.items()}
        result["accel"] = transport.vm.accel
    finally:
        if client is not None:
            client.close()
        transport.close()
    base = result["paramiko_exec"]["median_ms"]
    ratios = {
        "ours_line_over_paramiko_exec": result["ours_line"]["median_ms"] / base,
        "ours_command_over_paramiko_exec": result["ours_command"]["median_ms"] / base,
        "ours_line_over_paramiko_line": result["ours_line"]["median_ms"]
        / result["paramiko_line"]["median_ms"],
    }
    return {
        "latency": result,
        "ratios": ratios,
        "target_ratio": TARGET_RATIO,
        "met": ratios["ours_line_over_paramiko_exec"] <= TARGET_RATIO
        and ratios["ours_command_over_paramiko_exec"] <= TARGET_RATIO,
    }


def desktop_vm() -> dict:
    accel, why = choose_accel(os.environ.get("AGENTWORLD_VM_ACCEL", "auto"))
    result: dict = {"kvm_usable": kvm_usable(), "accel": accel, "accel_reason": why}
    result[accel] = _boot_and_resets(accel)
    result["step"] = step_latency()
    return result


def markdown_lines(r: dict) -> list[str]:
    lines = [
        f"Acceleration: {r['accel']} ({r['accel_reason']}).",
        "",
        "| acceleration | cold boot to sshd s | start from cached snapshot s (median) | loadvm reset s |",
        "|---|---|---|---|",
    ]
    for accel in ("kvm", "tcg"):
        if accel in r:
            v = r[accel]
            restored = v["start_from_cached_snapshot"]["median_ms"] / 1000
            loadvm = v["reset_loadvm"]["median_ms"] / 1000
            lines.append(f"| {accel} | {v['cold_boot_s']:.1f} | {restored:.1f} | {loadvm:.2f} |")
    step = r["step"]
    lines += [
        "",
        f"Step latency on one VM ({step['latency']['accel']}), same run:",
        "",
        "| step | median ms | p95 ms | ratio to bare paramiko exec_command |",
        "|---|---|---|---|",
    ]
    base = step["latency"]["paramiko_exec"]["median_ms"]
    for name in ("ours_line", "ours_command", "paramiko_exec", "paramiko_line"):
        v = step["latency"][name]
        lines.append(f"| {name} | {v['median_ms']:.3f} | {v['p95_ms']:.3f} | {v['median_ms'] / base:.2f}x |")
    lines.append(f"\nTarget <= {step['target_ratio']}x bare paramiko: {'met' if step['met'] else 'NOT met'}.")
    return lines

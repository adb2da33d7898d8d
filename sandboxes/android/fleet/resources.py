"""Will n emulators fit on this host? The per-emulator budget we assume, the host we measure, and the plan.

The default budget is for one x86_64 Google APIs phone image run headless with `-read-only`:
- 2 host cores. Android Studio writes `hw.cpu.ncore=4` into the AVDs it makes; driven by UI automation
  (no video, no games) an instance keeps about two of those busy. This is our working assumption, not a
  measurement: no emulator can run on the machines this was written on. Change it with EmulatorBudget.
- 3072 MiB of host memory: the guest's `hw.ramSize` of 2048 MiB (the emulator's own AVD test expects 2048
  for an API 30 AVD, and the `-memory` option documents 1536..8192 MiB) plus about 1 GiB for the emulator
  process itself (QEMU, the SwiftShader renderer, buffers), our assumption.
- 6 GiB of disk: with `-read-only` each instance writes to temporary copies of its writable images, at most
  the data partition; Android Studio's default internal storage (`disk.dataPartition.size`) is 6 GB.
- KVM: x86_64 system images need hardware acceleration (`/dev/kvm` on Linux); without it the emulator
  stops at start.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from dataclasses import asdict, dataclass, field

from sandboxes.android.fleet.ports import planned_ports

KVM_GET_API_VERSION = 0xAE00  # the ioctl number from <linux/kvm.h>; the stable API answers 12
KVM_STABLE_API = 12
WARN_SHARE = 0.8  # a plan that uses more than this share of any resource is started with a warning


@dataclass(frozen=True)
class EmulatorBudget:
    """What one emulator instance is assumed to take from the host."""

    cores: float = 2.0
    memory_mib: int = 3072
    disk_mib: int = 6 * 1024
    needs_kvm: bool = True
    source: str = (
        "x86_64 Google APIs phone image, headless, -read-only: 2 of the AVD's hw.cpu.ncore=4 vCPUs busy, "
        "hw.ramSize 2048 MiB + ~1 GiB emulator process, 6 GB data partition (Android Studio default); "
        "see sandboxes/android/fleet/resources.py"
    )


DEFAULT_BUDGET = EmulatorBudget()


@dataclass(frozen=True)
class HostResources:
    cores: float
    memory_mib: int
    disk_mib: int
    disk_path: str
    kvm: bool
    kvm_detail: str


def _cgroup_cores() -> float | None:
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _available_memory_mib() -> int:
    available = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) // 1024
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if limit != "max":
            available = min(available, (int(limit) - used) // (1024 * 1024))
    except (OSError, ValueError):
        pass
    return available


def probe_kvm(path: str = "/dev/kvm") -> tuple[bool, str]:
    """Can this process use KVM? Opens the device and asks for its API version, as the emulator would."""
    if not os.path.exists(path):
        return False, f"{path} does not exist (no hardware virtualisation, or the kvm module is not loaded)"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        return False, f"{path} cannot be opened ({exc.strerror}): add this user to the kvm group"
    try:
        version = fcntl.ioctl(fd, KVM_GET_API_VERSION)
    except OSError as exc:
        return False, f"{path} does not answer KVM_GET_API_VERSION ({exc.strerror})"
    finally:
        os.close(fd)
    if version != KVM_STABLE_API:
        return False, f"{path} reports KVM API {version}, expected {KVM_STABLE_API}"
    return True, f"{path} usable (KVM API {version})"


def probe_host(disk_path: str) -> HostResources:
    """What this host offers now: usable cores, available memory, free disk under disk_path, KVM."""
    cores: float = len(os.sched_getaffinity(0))
    quota = _cgroup_cores()
    if quota is not None:
        cores = min(cores, quota)
    os.makedirs(disk_path, exist_ok=True)
    kvm, detail = probe_kvm()
    return HostResources(
        cores=cores,
        memory_mib=_available_memory_mib(),
        disk_mib=shutil.disk_usage(disk_path).free // (1024 * 1024),
        disk_path=disk_path,
        kvm=kvm,
        kvm_detail=detail,
    )


@dataclass
class ResourcePlan:
    """What starting `emulators` instances needs, what the host has, and whether the fleet may go ahead.

    verdict: "ok"; "warn" (fits, but uses more than 80% of something, or overcommit was allowed);
    "refuse" (does not fit, or KVM is needed and missing). `reasons` says why in words a user can act on.
    """

    emulators: int
    batch_size: int
    budget: EmulatorBudget
    host: HostResources
    needed: dict[str, float]
    fits: dict[str, int]
    ports: dict[str, tuple[int, int]]
    verdict: str
    reasons: list[str] = field(default_factory=list)

    @property
    def max_emulators(self) -> int:
        return min(self.fits.values())

    def to_dict(self) -> dict:
        return {**asdict(self), "max_emulators": self.max_emulators}

    def text(self) -> str:
        b, h = self.budget, self.host
        lines = [
            f"Android emulator fleet plan: {self.emulators} emulators, "
            f"booted in batches of {self.batch_size}",
            f"  per emulator (assumed): {b.cores:g} cores, {b.memory_mib} MiB memory, {b.disk_mib} MiB disk, "
            f"KVM {'required' if b.needs_kvm else 'not required'}",
            f"    source: {b.source}",
            f"  needed in total: {self.needed['cores']:g} cores, {self.needed['memory_mib']:.0f} MiB memory, "
            f"{self.needed['disk_mib']:.0f} MiB disk",
            f"  this host: {h.cores:g} cores, {h.memory_mib} MiB memory available, {h.disk_mib} MiB free "
            f"under {h.disk_path}; KVM: {h.kvm_detail}",
            f"  fits: {self.fits['cores']} by cores, {self.fits['memory']} by memory, "
            f"{self.fits['disk']} by disk -> at most {self.max_emulators} emulators",
            "  ports: "
            + ", ".join(f"{k} {lo}-{hi}" for k, (lo, hi) in self.ports.items())
            + " (busy ones skipped)",
            f"  verdict: {self.verdict}",
        ]
        lines += [f"  - {reason}" for reason in self.reasons]
        return "\n".join(lines)


def make_plan(
    emulators: int,
    host: HostResources,
    budget: EmulatorBudget = DEFAULT_BUDGET,
    batch_size: int = 8,
    allow_overcommit: bool = False,
) -> ResourcePlan:
    """The plan for `emulators` instances on `host`; refuses what does not fit unless overcommit is
    allowed."""
    if emulators < 1:
        raise ValueError(f"emulators must be at least 1, got {emulators}")
    needed = {
        "cores": budget.cores * emulators,
        "memory_mib": budget.memory_mib * emulators,
        "disk_mib": budget.disk_mib * emulators,
    }
    fits = {
        "cores": int(host.cores // budget.cores) if budget.cores else emulators,
        "memory": host.memory_mib // budget.memory_mib if budget.memory_mib else emulators,
        "disk": host.disk_mib // budget.disk_mib if budget.disk_mib else emulators,
    }
    reasons: list[str] = []
    verdict = "ok"
    if budget.needs_kvm and not host.kvm:
        verdict = "refuse"
        reasons.append(f"KVM is required and not usable: {host.kvm_detail}")
    short = [kind for kind, count in fits.items() if count < emulators]
    if short:
        what = ", ".join(f"{kind} allows {fits[kind]}" for kind in short)
        if allow_overcommit:
            verdict = "warn" if verdict == "ok" else verdict
            reasons.append(f"overcommitted ({what}); emulators will be slow or be killed for memory")
        else:
            verdict = "refuse"
            reasons.append(
                f"{emulators} emulators do not fit ({what}): ask for at most {min(fits.values())}, "
                "use a bigger host, or pass a smaller per-emulator budget if your image needs less"
            )
    elif verdict == "ok":
        tight = [kind for kind, count in fits.items() if emulators > WARN_SHARE * count]
        if tight:
            verdict = "warn"
            reasons.append(f"more than {WARN_SHARE:.0%} of the host's {', '.join(tight)} in use")
    return ResourcePlan(
        emulators=emulators,
        batch_size=min(batch_size, emulators),
        budget=budget,
        host=host,
        needed=needed,
        fits=fits,
        ports=planned_ports(emulators),
        verdict=verdict,
        reasons=reasons,
    )

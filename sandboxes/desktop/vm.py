"""The OS domain's virtual machine backend: a QEMU VM booted from the project's own Debian image
(`infra/desktop-vm/build.sh`), driven over SSH like any remote desktop.

Isolation: the VM's only network is QEMU's user-mode stack with `restrict=on` (no packet leaves for
the host or the outside) and one forward from 127.0.0.1:<free port> on the host to the guest's sshd.
Each VM writes to its own qcow2 overlay on top of the shared base image, so the base never changes.
Reset: a snapshot of the booted VM (`savevm` once, `loadvm` per reset, through QMP) when enabled,
else a fresh overlay and a new boot. The first VM of an image and machine shape caches its booted
snapshot next to the image; later VMs start from a copy of it (`-loadvm`) instead of booting.
Acceleration: see `vm_image.choose_accel` (KVM on bare metal with /dev/kvm, else TCG).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sandboxes.base import SandboxCrashedError
from sandboxes.desktop.transport import Channel, Transport
from sandboxes.desktop.vm_image import Qmp, VmImage, choose_accel
from schemas.cli import command_parser

if TYPE_CHECKING:  # paramiko is the desktop extra: vm.py itself loads without it
    from sandboxes.desktop.ssh import SshTarget, SshTransport

log = logging.getLogger(__name__)

SNAPSHOT_NAME = "booted"
DEATH_GRACE_S = 2.0  # see QemuVm.check_alive
MACHINE_LAYOUT = 1  # bump when the QEMU command line's devices change: cached snapshots no longer fit


@dataclass
class VmConfig:
    image: VmImage = field(default_factory=VmImage.default)
    memory_mb: int = 1024
    cpus: int = 1
    # "auto" (KVM when /dev/kvm opens), "kvm" or "tcg"; $AGENTWORLD_VM_ACCEL sets the default.
    accel: str = field(default_factory=lambda: os.environ.get("AGENTWORLD_VM_ACCEL", "auto"))
    boot_timeout_s: float | None = None  # None: 120 s under KVM, 900 s under TCG
    snapshot_reset: bool = True  # False: reset by a fresh overlay and a new boot
    qmp_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if not 256 <= self.memory_mb <= 16384:
            raise ValueError(f"memory_mb={self.memory_mb}: choose 256..16384")
        if not 1 <= self.cpus <= max(1, os.cpu_count() or 1):
            raise ValueError(f"cpus={self.cpus}: choose 1..{os.cpu_count()} (this host's cores)")
        if self.accel not in ("auto", "kvm", "tcg"):
            raise ValueError(f"accel={self.accel!r}: choose auto, kvm or tcg")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QemuVm:
    """One VM: start (boot to sshd), reset (snapshot or reboot), close (kill qemu, remove its files)."""

    def __init__(self, config: VmConfig | None = None) -> None:
        self.config = config or VmConfig()
        self.image = self.config.image
        self.accel = ""
        self.port = 0
        self.dir: Path | None = None
        self.boot_seconds = 0.0
        self.snapshot_seconds = 0.0  # savevm + caching the booted state, on a first start
        self.start_method = ""
        self.last_reset: dict = {}
        self._proc: subprocess.Popen | None = None
        self._qmp: Qmp | None = None
        self._has_snapshot = False

    # -- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Boot (or restore the cached booted state) until the guest's sshd answers."""
        if self._proc is not None and self.alive():
            return
        self.image.require()
        self.accel, why = choose_accel(self.config.accel)
        log.info("desktop VM: %s acceleration (%s)", self.accel, why)
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="agentworld-vm-"))
        t0 = time.perf_counter()
        overlay = self.dir / "overlay.qcow2"
        cached = self._booted_state_path()
        self.start_method = ""
        if self.config.snapshot_reset and cached.exists():
            # A copy of a VM saved right after boot: seconds instead of a boot (minutes under TCG).
            shutil.copyfile(cached, overlay)
            try:
                self._launch(overlay, loadvm=True, timeout_s=60.0)
                self.start_method = "restored the cached booted snapshot"
            except (SandboxCrashedError, TimeoutError) as exc:
                log.warning("desktop VM: the cached snapshot %s did not restore (%s); booting", cached, exc)
                self.close_process()
                cached.unlink(missing_ok=True)
        if not self.start_method.startswith("restored"):
            self._fresh_overlay(overlay)
            self._launch(overlay, loadvm=False, timeout_s=self.boot_timeout_s)
            self.start_method = "booted"
            if self.config.snapshot_reset:
                self._save_booted_state(overlay, cached)
                self.start_method = "booted, snapshot saved and cached for later starts"
        self._has_snapshot = self.config.snapshot_reset
        self.boot_seconds = time.perf_counter() - t0
        log.info("desktop VM up in %.1f s (%s, %s)", self.boot_seconds, self.accel, self.start_method)

    @property
    def boot_timeout_s(self) -> float:
        if self.config.boot_timeout_s is not None:
            return self.config.boot_timeout_s
        return 120.0 if self.accel == "kvm" else 900.0

    def _booted_state_path(self) -> Path:
        """Where this image's booted snapshot for this machine shape is cached. The key covers what
        must match for `-loadvm` to work: the build (its host key is unique), QEMU, accel, memory, cpus."""
        qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True, timeout=30)
        shape = "|".join(
            [self.image.path("host_key.pub").read_text(), qemu.stdout.splitlines()[0], self.accel,
             str(self.config.memory_mb), str(self.config.cpus), str(MACHINE_LAYOUT)]
        )  # fmt: skip
        return self.image.root / "booted" / f"{hashlib.sha256(shape.encode()).hexdigest()[:16]}.qcow2"

    def _save_booted_state(self, overlay: Path, cached: Path) -> None:
        """`savevm` the just-booted VM and cache a copy of its overlay for later starts."""
        assert self._qmp is not None
        t0 = time.perf_counter()
        # Stopped, QEMU has written its qcow2 metadata out, so the file is consistent to copy.
        self._qmp.execute("stop")
        self.save_snapshot()
        partial = cached.with_name(f".{cached.name}.{os.getpid()}.partial")
        try:
            cached.parent.mkdir(exist_ok=True)
            shutil.copyfile(overlay, partial)
            os.replace(partial, cached)  # concurrent first starts each write whole files; one wins
        except OSError as exc:  # a read-only image directory: this VM still has its snapshot
            log.warning("desktop VM: cannot cache the booted snapshot in %s: %s", cached.parent, exc)
            partial.unlink(missing_ok=True)
        self._qmp.execute("cont")
        self.snapshot_seconds = time.perf_counter() - t0

    def _fresh_overlay(self, overlay: Path) -> None:
        overlay.unlink(missing_ok=True)
        base = str(self.image.path("disk.qcow2"))
        subprocess.run(
            ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, str(overlay)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

    def _launch(self, overlay: Path, loadvm: bool, timeout_s: float) -> None:
        assert self.dir is not None
        self.port = _free_port()
        (self.dir / "known_hosts").write_text(self.image.host_key_line("127.0.0.1", self.port))
        qmp_path = self.dir / "qmp.sock"
        qmp_path.unlink(missing_ok=True)
        argv = [
            "qemu-system-x86_64", "-name", "agentworld-desktop-vm", "-nodefaults", "-no-user-config",
            "-display", "none", "-machine", "q35", "-accel", self.accel,
            # Without arch-capabilities: nested KVM (this project's AMD hosts) fails setting its MSR.
            "-cpu", "host,-arch-capabilities" if self.accel == "kvm" else "max",
            "-m", str(self.config.memory_mb), "-smp", str(self.config.cpus),
            "-kernel", str(self.image.path("vmlinuz")), "-initrd", str(self.image.path("initrd.img")),
            "-append", self.image.manifest["kernel_cmdline"] + " quiet",
            "-drive", f"file={overlay},if=virtio,format=qcow2,cache=unsafe",
            "-netdev", f"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:{self.port}-:22",
            "-device", "virtio-net-pci,netdev=net0", "-device", "virtio-rng-pci",
            # A new generation id per launch makes a guest restored from the shared snapshot reseed
            # its random number generator, so VMs started from one snapshot do not share it.
            "-device", "vmgenid",
            "-serial", f"file:{self.dir / 'serial.log'}",
            "-qmp", f"unix:{qmp_path},server=on,wait=off",
            *(["-loadvm", SNAPSHOT_NAME] if loadvm else []),
        ]  # fmt: skip
        stderr = open(self.dir / "qemu.stderr", "wb")  # noqa: SIM115 - the child keeps writing to it
        # Own session: close() kills qemu's whole process group, never the caller's.
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                      start_new_session=True)  # fmt: skip
        stderr.close()
        self._wait_for(lambda: qmp_path.exists(), 30.0, "QEMU's QMP socket")
        self._qmp = Qmp(qmp_path, self.config.qmp_timeout_s)
        self._wait_for(self._sshd_answers, timeout_s, "the guest's sshd")

    def _wait_for(self, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_alive()
            if ready():
                return
            time.sleep(0.2)
        self.check_alive()
        raise TimeoutError(
            f"desktop VM: {what} not ready after {timeout_s:.0f} s ({self.accel}); serial console tail:\n"
            + self.serial_tail()
        )

    def _sshd_answers(self) -> bool:
        """True once the guest's sshd sends its banner (QEMU accepts on the port before the guest does)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2.0) as s:
                s.settimeout(2.0)
                return s.recv(8).startswith(b"SSH-")
        except OSError:
            return False

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def check_alive(self, grace_s: float = 0.0) -> None:
        """SandboxCrashedError when qemu has exited. `grace_s`: after a connection into the guest
        dropped, wait that long for the exit, which a killed qemu shows just after its sockets close."""
        if self._proc is None:
            raise SandboxCrashedError("desktop VM not started")
        try:
            code = self._proc.wait(timeout=grace_s) if grace_s > 0 else self._proc.poll()
        except subprocess.TimeoutExpired:
            return
        if code is not None:
            stderr = (self.dir / "qemu.stderr").read_text(errors="replace")[-800:] if self.dir else ""
            raise SandboxCrashedError(
                f"desktop VM died (qemu exit status {code}). qemu: {stderr.strip() or '-'}; "
                f"serial console tail:\n{self.serial_tail()}"
            )

    def serial_tail(self, lines: int = 15) -> str:
        path = self.dir / "serial.log" if self.dir else None
        if path is None or not path.exists():
            return "(no serial output)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    # -- reset ------------------------------------------------------------------------------
    def reset(self) -> dict:
        """Back to the state `start` left (snapshot taken right after boot). The caller must have
        closed its SSH connections: the guest's side of them is rewound or rebooted away.
        Returns {"method", "seconds"}."""
        t0 = time.perf_counter()
        if not self.alive():
            self.close_process()
            self.start()
            method = f"restarted after the VM died ({self.start_method})"
        elif self.config.snapshot_reset:
            method = self._snapshot_reset()
        else:
            self.close_process()
            self.start()
            method = "fresh overlay + reboot"
        self.last_reset = {"method": method, "seconds": time.perf_counter() - t0}
        return self.last_reset

    def save_snapshot(self) -> None:
        """Snapshot the VM as the reset point (`start` does, before any SSH session)."""
        assert self._qmp is not None
        output = self._qmp.human(f"savevm {SNAPSHOT_NAME}")
        if output.strip():
            raise RuntimeError(f"savevm failed: {output.strip()}")

    def _snapshot_reset(self) -> str:
        assert self._qmp is not None and self._has_snapshot
        output = self._qmp.human(f"loadvm {SNAPSHOT_NAME}")
        if output.strip():
            raise RuntimeError(f"loadvm failed: {output.strip()}")
        self._wait_for(self._sshd_answers, 30.0, "sshd after loadvm")
        return "loadvm"

    # -- close ------------------------------------------------------------------------------
    def close_process(self) -> None:
        if self._qmp is not None:
            self._qmp.close()
            self._qmp = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)

    def close(self) -> None:
        self.close_process()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def resources(self) -> list[str]:
        found = [f"pid:{self._proc.pid}"] if self._proc else []
        return found + ([f"path:{self.dir}"] if self.dir else [])

    def __enter__(self) -> QemuVm:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class VmChannel(Channel):
    """A guest program over SSH; when the VM itself died, errors say so (and raise SandboxCrashedError)."""

    def __init__(self, inner: Channel, vm: QemuVm) -> None:
        self._inner = inner
        self._vm = vm

    def send_line(self, line: str) -> None:
        try:
            self._inner.send_line(line)
        except (SandboxCrashedError, OSError, EOFError):
            self._vm.check_alive(grace_s=DEATH_GRACE_S)
            raise

    def recv_line(self, timeout_s: float) -> str:
        try:
            return self._inner.recv_line(timeout_s)
        except (SandboxCrashedError, TimeoutError, OSError, EOFError):
            # qemu's exit closes the forwarded port, so the SSH side fails at once; name the cause.
            self._vm.check_alive(grace_s=DEATH_GRACE_S)
            raise

    def alive(self) -> bool:
        return self._vm.alive() and self._inner.alive()

    def kill(self) -> None:
        if self._vm.alive():
            self._inner.kill()


class VmTransport(Transport):
    """A desktop target inside a QEMU VM, reached over SSH (`SshTransport`) on the forwarded port.

    `restore()` puts the whole VM back to its booted snapshot (an episode's reset); the guest
    program is spawned again afterwards. The VM is started on first use and closed with the
    transport unless it was passed in (then its owner closes it)."""

    kind = "vm"

    def __init__(self, vm: QemuVm | None = None, config: VmConfig | None = None) -> None:
        self.vm = vm if vm is not None else QemuVm(config)
        self._owns_vm = vm is None
        self._ssh: SshTransport | None = None

    def ssh_target(self) -> SshTarget:
        from sandboxes.desktop.ssh import SshTarget

        self.vm.start()
        assert self.vm.dir is not None
        return SshTarget(
            host="127.0.0.1",
            port=self.vm.port,
            user=self.vm.image.manifest["user"],
            key_file=str(self.vm.image.path("agent_key")),
            known_hosts=str(self.vm.dir / "known_hosts"),
        )

    def ssh(self) -> SshTransport:
        """The SSH connection into the VM (booting the VM and connecting on first use)."""
        if self._ssh is None:
            from sandboxes.desktop.ssh import SshTransport

            if self.vm.pid() is None:
                self.vm.start()
            self.vm.check_alive()
            self._ssh = SshTransport(self.ssh_target())
        return self._ssh

    def spawn(self, argv: list[str], env: dict[str, str]) -> Channel:
        try:
            return VmChannel(self.ssh().spawn(argv, env), self.vm)
        except (SandboxCrashedError, OSError, EOFError):
            self.vm.check_alive(grace_s=DEATH_GRACE_S)
            raise

    def put_file(self, local: Path, remote: str) -> None:
        self.ssh().put_file(local, remote)

    def workdir(self) -> str:
        return self.ssh().workdir()

    def restore(self) -> dict:
        """Reset the VM to its booted snapshot (or reboot it); returns {"method", "seconds"}."""
        self._drop_ssh()
        return self.vm.reset()

    def _drop_ssh(self) -> None:
        ssh, self._ssh = self._ssh, None
        if ssh is not None:
            if self.vm.alive():
                ssh.close()
            else:  # nothing to clean inside a dead VM; closing would wait on its timeouts
                ssh.abandon()

    def resources(self) -> list[str]:
        # Everything the guest holds dies with qemu and its overlay: the VM's own are the ones to check,
        # when this transport owns the VM (a VM passed in outlives the transport by design).
        return self.vm.resources() if self._owns_vm else []

    def close(self) -> None:
        try:
            self._drop_ssh()
        finally:
            if self._owns_vm:
                self.vm.close()


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(
        "python -m sandboxes.desktop.vm",
        "Show the desktop VM image, and optionally boot one VM so that its booted "
        "snapshot is cached (later VMs then start in seconds instead of a boot).",
        "examples:\n  sudo infra/desktop-vm/build.sh          # build the image once\n"
        "  python -m sandboxes.desktop.vm          # where it is, what it holds\n"
        "  python -m sandboxes.desktop.vm --warm   # boot once, cache the booted snapshot",
    )
    parser.add_argument("--warm", action="store_true", help="boot one VM and cache its booted snapshot")
    args = parser.parse_args(argv)
    image = VmImage.default()
    try:
        manifest = image.require().manifest
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 1
    accel, why = choose_accel(os.environ.get("AGENTWORLD_VM_ACCEL", "auto"))
    size_mib = manifest["disk_qcow2_bytes"] / 2**20
    print(
        f"image v{manifest['version']} in {image.root}: kernel {manifest['kernel_version']}, "
        f"qcow2 {size_mib:.0f} MiB; acceleration here: {accel} ({why})"
    )
    if args.warm:
        print("starting a VM (a first boot takes minutes under TCG) ...", flush=True)
        with QemuVm() as vm:
            print(f"up in {vm.boot_seconds:.1f} s: {vm.start_method}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

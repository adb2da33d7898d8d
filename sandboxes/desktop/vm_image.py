"""What the OS domain's virtual machines boot from, and on: the image that
`infra/desktop-vm/build.sh` builds, the acceleration this host offers (KVM or TCG), and the QMP
client that controls a running VM (`vm.py` runs them)."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from sandboxes.base import SandboxCrashedError
from sandboxes.cache import cache_root

IMAGE_VERSION = 2  # infra/desktop-vm/build.sh's VERSION
BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "infra" / "desktop-vm" / "build.sh"


@dataclass(frozen=True)
class VmImage:
    """A built image directory, as build.sh lays it out."""

    root: Path

    @classmethod
    def default(cls) -> VmImage:
        return cls(cache_root() / "desktop-vm" / str(IMAGE_VERSION))

    def require(self) -> VmImage:
        if not (self.root / "manifest.json").is_file():
            raise FileNotFoundError(
                f"no desktop VM image in {self.root}: build it once with `sudo {BUILD_SCRIPT}` "
                "(debootstrap, several minutes; set AGENTWORLD_CACHE_DIR to build elsewhere)"
            )
        return self

    @property
    def manifest(self) -> dict:
        return json.loads((self.root / "manifest.json").read_text())

    def path(self, name: str) -> Path:
        return self.root / name

    def host_key_line(self, host: str, port: int) -> str:
        """The known_hosts line of this image's host key for `host:port`."""
        key_type, key = self.path("host_key.pub").read_text().split()[:2]
        return f"[{host}]:{port} {key_type} {key}\n"


def kvm_usable() -> bool:
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    return True


def _host_is_a_vm() -> bool:
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("flags") and " hypervisor" in line for line in f)


def choose_accel(requested: str) -> tuple[str, str]:
    """("kvm" or "tcg", why). `auto` takes KVM on bare metal only: on this project's hosts, which are
    VMs themselves, a nested-KVM guest showed no sshd (nor serial output) after 400 s where TCG boots
    in 100-280 s; ask for "kvm" to force it."""
    if requested == "tcg":
        return "tcg", "requested"
    if not kvm_usable():
        if requested == "kvm":
            raise RuntimeError("accel=kvm but /dev/kvm cannot be opened; use accel=auto or tcg")
        return "tcg", "/dev/kvm cannot be opened: software emulation"
    if requested == "kvm":
        return "kvm", "requested"
    if _host_is_a_vm():
        return "tcg", "this host is a VM itself (nested KVM); AGENTWORLD_VM_ACCEL=kvm forces KVM"
    return "kvm", "/dev/kvm opens"


class Qmp:
    """A minimal QMP client on a unix socket: one command, one reply (events are skipped)."""

    def __init__(self, path: Path, timeout_s: float) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout_s)
        self._sock.connect(str(path))
        self._file = self._sock.makefile("rb")
        self._read()  # the greeting
        self.execute("qmp_capabilities")

    def _read(self) -> dict:
        line = self._file.readline()
        if not line:
            raise SandboxCrashedError("QEMU closed its QMP socket (the VM exited)")
        return json.loads(line)

    def execute(self, command: str, **arguments: object) -> object:
        request = {"execute": command, **({"arguments": arguments} if arguments else {})}
        self._sock.sendall(json.dumps(request).encode() + b"\n")
        while True:
            reply = self._read()
            if "return" in reply:
                return reply["return"]
            if "error" in reply:
                raise RuntimeError(f"QMP {command}: {reply['error'].get('desc', reply['error'])}")

    def human(self, command_line: str) -> str:
        """An HMP command (savevm/loadvm have no QMP form in QEMU 7); its output, where errors show."""
        return str(self.execute("human-monitor-command", **{"command-line": command_line}))

    def close(self) -> None:
        self._file.close()
        self._sock.close()

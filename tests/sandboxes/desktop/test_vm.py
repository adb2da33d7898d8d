"""The VM backend on a real QEMU VM booted from the project's own image (infra/desktop-vm/build.sh).

One VM serves the module (acceleration as `choose_accel` picks: TCG on this project's nested hosts);
the crash test runs last and leaves it restarted. The image is built once (several minutes) when the
cache lacks it, and the first VM of an image boots (minutes under TCG) and caches its booted
snapshot, from which later runs start in seconds.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import paramiko
import pytest

from sandboxes.base import SandboxCrashedError
from sandboxes.checks import check_sandbox, resource_exists
from sandboxes.desktop.config import DesktopConfig
from sandboxes.desktop.sandbox import DesktopSandbox
from sandboxes.desktop.vm import QemuVm, VmConfig, VmTransport
from sandboxes.desktop.vm_image import BUILD_SCRIPT, VmImage
from schemas.records import Action, Task
from tests.sandboxes.desktop.desktop_helpers import find_node

EDITOR = Task(id="editor", metadata={"apps": ["editor"]})
TERMINAL = Task(id="terminal", metadata={"apps": ["terminal"]})


@pytest.fixture(scope="session")
def vm_image() -> VmImage:
    image = VmImage.default()
    if not (image.root / "manifest.json").is_file():
        subprocess.run([str(BUILD_SCRIPT)], check=True, timeout=3600)
    return image.require()


@pytest.fixture(scope="module")
def vm(vm_image: VmImage) -> Iterator[QemuVm]:
    machine = QemuVm(VmConfig(image=vm_image, memory_mb=1024))
    try:
        machine.start()
        yield machine
    finally:
        machine.close()
    for resource in machine.resources():
        assert not resource_exists(resource), resource


def _connect(vm: QemuVm, known_hosts: str | None = None) -> paramiko.SSHClient:
    assert vm.dir is not None
    client = paramiko.SSHClient()
    client.load_host_keys(known_hosts or str(vm.dir / "known_hosts"))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        "127.0.0.1",
        port=vm.port,
        username="agent",
        key_filename=str(vm.image.path("agent_key")),
        look_for_keys=False,
        allow_agent=False,
        timeout=20,
        banner_timeout=20,
        auth_timeout=20,
    )
    return client


def _run(client: paramiko.SSHClient, command: str, timeout_s: float = 60) -> tuple[int, str]:
    _, stdout, stderr = client.exec_command(command, timeout=timeout_s)
    out = stdout.read().decode() + stderr.read().decode()
    return stdout.channel.recv_exit_status(), out


def test_boots_and_sshd_proves_the_known_host_key(vm: QemuVm, tmp_path) -> None:
    assert vm.accel in ("kvm", "tcg")
    assert vm.boot_seconds > 0
    client = _connect(vm)
    try:
        code, out = _run(client, "hostname; id -un")
        assert code == 0
        assert out.split() == ["agentworld-desktop-vm", "agent"]
    finally:
        client.close()
    # Another key under the VM's name is refused: the client checks the key, not just the name.
    other = paramiko.Ed25519Key.from_private_key_file(str(vm.image.path("agent_key")))
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{vm.port} {other.get_name()} {other.get_base64()}\n")
    with pytest.raises(paramiko.BadHostKeyException):
        _connect(vm, str(wrong))


def test_guest_has_the_desktop_stack(vm: QemuVm) -> None:
    client = _connect(vm)
    try:
        code, out = _run(
            client,
            "python3 -c 'import pyatspi, Xlib, PIL; print(\"imports ok\")' && "
            "command -v Xvfb openbox gnome-calculator mousepad xterm xdotool scrot dbus-launch "
            "| wc -l && test -x /usr/libexec/at-spi-bus-launcher && echo bus-launcher ok",
        )
        assert code == 0, out
        assert out.split() == ["imports", "ok", "8", "bus-launcher", "ok"]
    finally:
        client.close()


# Run in the guest: try the host (QEMU's gateway address), an outside address and QEMU's DNS.
NETWORK_PROBE = """
import socket, sys
for host, port in (("10.0.2.2", int(sys.argv[1])), ("1.1.1.1", 80), ("10.0.2.3", 53)):
    try:
        socket.create_connection((host, port), timeout=3).close()
        print("reached", host)
    except OSError:
        print("blocked", host)
"""


def test_guest_has_no_network_beyond_the_ssh_forward(vm: QemuVm) -> None:
    """The guest got its address by DHCP, yet reaches neither the host nor anything outside."""
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen(4)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    watcher = threading.Thread(target=accept, daemon=True)
    watcher.start()
    client = _connect(vm)
    try:
        code, addr = _run(client, "ip -4 -o addr show scope global")
        assert code == 0 and "10.0.2.15/" in addr, addr
        sftp = client.open_sftp()
        with sftp.file("/tmp/probe.py", "w") as f:
            f.write(NETWORK_PROBE)
        sftp.close()
        code, out = _run(client, f"python3 /tmp/probe.py {port}")
    finally:
        client.close()
        stop.set()
        watcher.join(timeout=5)
        listener.close()
    assert code == 0, out
    assert out.split("\n")[:3] == ["blocked 10.0.2.2", "blocked 1.1.1.1", "blocked 10.0.2.3"], out
    assert accepted == []


def test_desktop_step_through_the_vm_transport(vm: QemuVm) -> None:
    # Under software emulation on a loaded 2-core host the guest session takes ~40-50 s to start and
    # the editor ~65 s to show its window: the bounds say so (the defaults suit a local desktop).
    config = DesktopConfig(start_timeout=240, app_timeout=240)
    sandbox = DesktopSandbox(config, transport=VmTransport(vm))
    try:
        obs = sandbox.reset(EDITOR)
        assert obs.data["backend"] == "vm"
        assert obs.text.splitlines()[0] == "Focused: mousepad — Untitled 1 - Mousepad", obs.text[:500]
        assert [a.name for a in obs.attachments] == ["screenshot.png"]
        typed = sandbox.step(Action(kind="computer", arguments={"action": "type", "text": "hello vm"}))
        text = find_node(typed.observation.text, "text", "")
        assert text.value == "hello vm"
        assert "focused" in text.states
    finally:
        sandbox.close()
    assert vm.alive()  # the sandbox closed its transport; the VM is the fixture's


def test_check_sandbox_on_a_vm_the_transport_owns(vm_image: VmImage) -> None:
    """The sandbox contract over a VM of its own: closing the sandbox stops qemu and removes its files."""
    transport = VmTransport(config=VmConfig(image=vm_image))
    config = DesktopConfig(start_timeout=240, app_timeout=240, screenshot=False)
    typing = Action(kind="computer", arguments={"action": "type", "text": "hi"})
    # xterm: the lightest application (no GTK), since the contract, not the tree, is checked here.
    check_sandbox(DesktopSandbox(config, transport=transport), TERMINAL, [typing])
    assert transport.vm.pid() is None and transport.vm.dir is None


def test_reset_by_snapshot_undoes_a_change(vm: QemuVm) -> None:
    transport = VmTransport(vm)
    try:
        transport.ssh().check(["sh", "-c", "echo changed > /home/agent/marker && sync"])
        result = transport.restore()
        assert result["method"] == "loadvm"
        assert 0 < result["seconds"] < 60
        # The transport reconnects after the restore; the guest is as it was when snapshotted.
        status, out, _ = transport.ssh().run(["test", "-e", "/home/agent/marker"])
        assert status == 1, out
    finally:
        transport.close()
    assert transport.resources() == []  # the VM is the fixture's, not the transport's
    assert vm.alive()


def test_each_desktop_reset_after_the_first_restores_the_whole_vm(vm: QemuVm) -> None:
    transport = VmTransport(vm)
    config = DesktopConfig(start_timeout=240, app_timeout=240, screenshot=False)
    sandbox = DesktopSandbox(config, transport=transport)
    try:
        sandbox.reset(TERMINAL)
        # A change outside the session's home, which only the machine's snapshot undoes.
        transport.ssh().check(["sh", "-c", "echo changed > /home/agent/marker && sync"])
        sandbox.reset(TERMINAL)
        status, out, _ = transport.ssh().run(["test", "-e", "/home/agent/marker"])
        assert status == 1, out
        assert sandbox.describe().config["restore_machine"] is True
    finally:
        sandbox.close()


def test_vm_killed_mid_episode_raises_crashed_and_the_next_start_works(vm: QemuVm) -> None:
    transport = VmTransport(vm)
    channel = transport.spawn(["sh", "-c", "echo started; sleep 300"], {})
    assert channel.recv_line(30) == "started"
    pid = vm.pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    t0 = time.monotonic()
    # qemu's exit drops the forwarded connection: the wait ends at once, not at its timeout.
    with pytest.raises(SandboxCrashedError, match="desktop VM died"):
        channel.recv_line(60)
    assert time.monotonic() - t0 < 15
    assert not channel.alive()
    transport.close()
    result = vm.reset()
    assert result["method"].startswith("restarted")
    assert vm.start_method == "restored the cached booted snapshot"
    client = _connect(vm)
    try:
        assert _run(client, "echo back")[1].strip() == "back"
    finally:
        client.close()

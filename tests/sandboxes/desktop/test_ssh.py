"""SshTransport against a real OpenSSH server on 127.0.0.1 (tests/sandboxes/desktop/sshd.py).

The target is this host, so what the transport started remotely is checked here in /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sandboxes.base import SandboxCrashedError
from sandboxes.checks import check_sandbox, group_members, resource_exists
from sandboxes.desktop import DesktopConfig, DesktopSandbox
from sandboxes.desktop.ssh import HostKeyError, SshError, SshTarget, SshTransport, SshUnreachableError
from schemas.records import Action, Task
from tests.sandboxes.desktop.desktop_helpers import find_node
from tests.sandboxes.desktop.sshd import LocalSshd, keygen

# A stand-in guest: the same line protocol shape (a ready line, then one reply per request line).
ECHO_PROGRAM = """\
import os, sys
print("ready", os.environ.get("GREETING", ""), flush=True)
for line in sys.stdin:
    line = line.rstrip("\\n")
    if line == "silent":
        continue
    if line == "die":
        print("dying on request", file=sys.stderr, flush=True)
        sys.exit(7)
    print(line.upper(), flush=True)
"""


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    with LocalSshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@pytest.fixture
def transport(sshd: LocalSshd):
    ssh = SshTransport(sshd.target())
    yield ssh
    ssh.close()


def _fingerprint(pub: Path) -> str:
    return subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True).stdout.split()[1]


def _spawn_echo(ssh: SshTransport, tmp_path: Path, env: dict[str, str] | None = None):
    program = tmp_path / "echo.py"
    program.write_text(ECHO_PROGRAM)
    remote = f"{ssh.workdir()}/echo.py"
    ssh.put_file(program, remote)
    chan = ssh.spawn(["/usr/bin/python3", remote], env or {})
    return chan, chan.recv_line(10)


def test_known_host_key_runs_commands(transport: SshTransport) -> None:
    assert transport.run(["echo", "two words", "$HOME;"]) == (0, "two words $HOME;\n", "")
    status, out, err = transport.run(["sh", "-c", "echo oops >&2; exit 3"])
    assert (status, out, err) == (3, "", "oops\n")
    with pytest.raises(SshError, match="failed \\(3\\): oops"):
        transport.check(["sh", "-c", "echo oops >&2; exit 3"])
    with pytest.raises(TimeoutError, match="timed out"):
        transport.run(["sleep", "3"], timeout_s=0.5)


def test_unknown_host_key_is_refused_with_how_to_add_it(sshd: LocalSshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError) as refused:
        SshTransport(sshd.target(known_hosts=str(empty))).run(["true"])
    message = str(refused.value)
    assert _fingerprint(sshd.host_key.with_suffix(".pub")) in message
    assert "ssh-keyscan" in message and "accept_unknown_host=True" in message
    assert empty.read_text() == "", "a refused key must not be recorded"


def test_opting_in_records_the_unknown_key(sshd: LocalSshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    trusting = SshTransport(sshd.target(known_hosts=str(known), accept_unknown_host=True))
    assert trusting.check(["echo", "ok"]) == "ok\n"
    trusting.close()
    host_pub = sshd.host_key.with_suffix(".pub").read_text().split()[1]
    assert f"[127.0.0.1]:{sshd.port} ssh-ed25519 {host_pub}" in known.read_text()
    checking = SshTransport(sshd.target(known_hosts=str(known)))  # no opt-in: the recorded key now passes
    assert checking.check(["echo", "again"]) == "again\n"
    checking.close()


def test_changed_host_key_is_refused_even_with_opt_in(sshd: LocalSshd, tmp_path: Path) -> None:
    other = keygen(tmp_path / "other_host").with_suffix(".pub").read_text().split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n")
    with pytest.raises(HostKeyError, match="does NOT match.*ssh-keygen -R"):
        SshTransport(sshd.target(known_hosts=str(known), accept_unknown_host=True)).run(["true"])


def test_an_ssh_agent_holding_the_right_key_is_not_used(
    sshd: LocalSshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", str(sshd.user_key)], env=env, check=True, capture_output=True, timeout=10)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        stranger = keygen(tmp_path / "stranger")
        with pytest.raises(SshError, match="refused the key"):
            SshTransport(sshd.target(key_file=str(stranger))).run(["true"])
    finally:
        agent.terminate()
        agent.wait(timeout=10)


def test_wrong_user_key_is_refused_without_retrying(sshd: LocalSshd, tmp_path: Path) -> None:
    stranger = keygen(tmp_path / "stranger")
    t0 = time.monotonic()
    with pytest.raises(SshError, match="refused the key .*authorized_keys"):
        SshTransport(sshd.target(key_file=str(stranger), reconnect_attempts=3)).run(["true"])
    assert time.monotonic() - t0 < 5, "an authentication failure is final, not a dropped connection"
    with pytest.raises(SshError, match="cannot read the private key"):
        SshTransport(sshd.target(key_file=str(tmp_path / "missing"))).run(["true"])


def test_spawn_line_protocol_env_timeout_and_exit(transport: SshTransport, tmp_path: Path) -> None:
    chan, ready = _spawn_echo(transport, tmp_path, {"GREETING": "hello 'quoted' $world"})
    assert ready == "ready hello 'quoted' $world"
    for word in ("abc", "x y z", "ünï"):
        chan.send_line(word)
        assert chan.recv_line(5) == word.upper()
    chan.send_line("silent")
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="no line from"):
        chan.recv_line(0.3)
    assert 0.25 < time.monotonic() - t0 < 2
    chan.send_line("still here")
    assert chan.recv_line(5) == "STILL HERE", "a timeout must not lose or shift later lines"
    chan.send_line("die")
    with pytest.raises(SandboxCrashedError, match="exited \\(status 7\\).*dying on request"):
        chan.recv_line(5)
    assert not chan.alive()
    with pytest.raises(SandboxCrashedError):
        chan.send_line("anyone?")


def test_kill_stops_the_whole_remote_process_group(transport: SshTransport) -> None:
    chan = transport.spawn(["sh", "-c", "sleep 300 & sleep 300 & echo started; cat"], {})
    assert chan.recv_line(5) == "started"
    assert chan.pgid is not None and len(group_members(chan.pgid)) >= 3
    chan.kill()
    assert group_members(chan.pgid) == [], "the program's children outlived kill()"
    assert not chan.alive()
    chan.kill()  # idempotent
    with pytest.raises(SandboxCrashedError):
        chan.recv_line(1)


def test_close_removes_workdir_and_processes(sshd: LocalSshd, tmp_path: Path) -> None:
    ssh = SshTransport(sshd.target())
    chan, _ = _spawn_echo(ssh, tmp_path)
    workdir = ssh.workdir()
    held = ssh.resources()
    assert f"path:{workdir}" in held and f"pid:{chan.pgid}" in held
    assert all(resource_exists(r) for r in held)
    ssh.close()
    ssh.close()  # idempotent
    assert not any(resource_exists(r) for r in held), held
    with pytest.raises(SshError, match="closed"):
        ssh.run(["true"])


def test_sshd_restart_crashes_the_open_channel_and_the_next_spawn_reconnects(
    sshd: LocalSshd, transport: SshTransport, tmp_path: Path
) -> None:
    chan, _ = _spawn_echo(transport, tmp_path)
    chan.send_line("before")
    assert chan.recv_line(5) == "BEFORE"
    sshd.restart()
    with pytest.raises(SandboxCrashedError, match="connection to .* dropped"):
        chan.send_line("during")
        chan.recv_line(5)
    fresh, ready = _spawn_echo(transport, tmp_path)
    assert ready.startswith("ready")
    fresh.send_line("after")
    assert fresh.recv_line(5) == "AFTER"
    assert transport.check(["echo", "ok"]) == "ok\n"


def test_unreachable_target_is_a_crash_after_bounded_retries(sshd: LocalSshd) -> None:
    closed_port = sshd.port
    down = SshTransport(sshd.target(reconnect_attempts=2, connect_timeout_s=2))
    sshd.stop()
    try:
        t0 = time.monotonic()
        with pytest.raises(SshUnreachableError, match="after 2 attempts") as failed:
            down.run(["true"])
        assert isinstance(failed.value, SandboxCrashedError)
        assert time.monotonic() - t0 < 10
    finally:
        sshd.start()
        assert sshd.port == closed_port


def test_target_parse() -> None:
    target = SshTarget.parse("alice@desk.example:2222", key_file="k", known_hosts="kh")
    assert (target.user, target.host, target.port) == ("alice", "desk.example", 2222)
    assert SshTarget.parse("bob@[::1]", key_file="k", known_hosts="kh").host == "::1"
    assert SshTarget.parse("bob@[::1]", key_file="k", known_hosts="kh").is_this_host
    with pytest.raises(ValueError, match="user@host"):
        SshTarget.parse("desk.example", key_file="k", known_hosts="kh")
    with pytest.raises(ValueError, match="out of range"):
        SshTarget("h", "u", "k", "kh", port=70000)


# -- the desktop sandbox over SSH: a real sshd serving a real desktop (Xvfb, AT-SPI, gnome-calculator)

CALCULATOR = Task(id="calc", metadata={"apps": ["calculator"]})


def _click(desktop: DesktopSandbox, obs_text: str, role: str, name: str) -> str:
    x, y = find_node(obs_text, role, name, prefix=True).centre
    return desktop.step(
        Action(kind="computer", arguments={"action": "click", "x": x, "y": y})
    ).observation.text


@pytest.fixture(scope="module")
def remote_desktop(sshd: LocalSshd):
    desktop = DesktopSandbox(DesktopConfig(screenshot=False), transport=SshTransport(sshd.target()))
    desktop.start()
    yield desktop
    desktop.close()


def test_remote_desktop_passes_check_sandbox(sshd: LocalSshd) -> None:
    desktop = DesktopSandbox(DesktopConfig(max_nodes=30), transport=SshTransport(sshd.target()))
    actions = [
        Action(kind="computer", arguments={"action": "type", "text": "12"}),
        Action(kind="pyautogui", arguments={"code": "pyautogui.press('enter')"}),
    ]
    check_sandbox(desktop, CALCULATOR, actions)  # screenshots on; resources (pid, workdir) gone after close


def test_remote_calculator_computes_7_plus_6(remote_desktop: DesktopSandbox) -> None:
    obs = remote_desktop.reset(CALCULATOR)
    assert obs.text.splitlines()[0] == "Focused: gnome-calculator — Calculator"
    assert obs.data["backend"] == "ssh" and remote_desktop.describe().backend == "ssh"
    text = obs.text
    for label in ("7 ", "+ ", "6 ", "= "):
        text = _click(remote_desktop, text, "push button", label)
    assert find_node(text, "text", "GtkSourceView").value == "13", text


def test_remote_desktop_refuses_an_unknown_host_key(sshd: LocalSshd, tmp_path: Path) -> None:
    (tmp_path / "known_hosts").write_text("")
    target = sshd.target(known_hosts=str(tmp_path / "known_hosts"))
    desktop = DesktopSandbox(DesktopConfig(screenshot=False), transport=SshTransport(target))
    with pytest.raises(HostKeyError, match="is not in"):
        desktop.start()
    desktop.close()


def test_remote_guest_killed_is_a_crash_and_the_next_reset_works(remote_desktop: DesktopSandbox) -> None:
    remote_desktop.reset(CALCULATOR)
    os.kill(remote_desktop._ready["pid"], signal.SIGKILL)  # the agent's pid, on this host (loopback)
    with pytest.raises(SandboxCrashedError, match="exited"):
        remote_desktop.step(Action(kind="computer", arguments={"action": "wait", "seconds": 0.1}))
    obs = remote_desktop.reset(CALCULATOR)
    assert remote_desktop.alive and find_node(obs.text, "frame", "Calculator")


def test_sshd_restart_mid_episode_is_a_crash_and_the_next_reset_reconnects(
    sshd: LocalSshd, remote_desktop: DesktopSandbox
) -> None:
    remote_desktop.reset(CALCULATOR)
    old_groups = [r for r in remote_desktop.resources() if r.startswith("pid:")]
    sshd.restart()
    with pytest.raises(SandboxCrashedError):
        remote_desktop.step(Action(kind="computer", arguments={"action": "wait", "seconds": 0.1}))
    assert not remote_desktop.alive
    obs = remote_desktop.reset(CALCULATOR)
    assert obs.data["error"] == "" and find_node(obs.text, "frame", "Calculator")
    assert old_groups and not [r for r in old_groups if resource_exists(r)], "the dropped desktop was left"
    assert [r for r in remote_desktop.resources() if r.startswith("pid:")] != old_groups

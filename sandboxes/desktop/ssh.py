"""The desktop guest program on a remote machine over SSH (paramiko).

Security choices, all fixed (not options):
- The server's host key must be in the target's own known-hosts file (never `~/.ssh`, never the
  system's). An unknown key is refused with an error that says how to add it; only
  `accept_unknown_host=True` trusts it on first use, and then records it in that file. A key that
  differs from the recorded one is always refused.
- Key authentication only, from the one key file given: no passwords, no SSH agent, no default
  key files (`allow_agent=False, look_for_keys=False`), no forwarding of any kind.

Programs start under `setsid` on a POSIX target, so each one and everything it starts share one
process group whose id the wrapper prints first; `kill` closes the channel (the guest program sees
end of input and shuts its session down) and then signals that group. The connection is reopened
for the next command or spawn when it has dropped; a channel that was running when it dropped
raises `SandboxCrashedError`.

`shell="windows"` targets Win32-OpenSSH (cmd.exe as the login shell) for
`guest/windows_agent.py`. That path is written from the documented behaviour and is untested
here: no Windows machine is reachable from this project's hosts. There is no process group to
signal, so `kill` relies on the agent stopping at end of input.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko

from sandboxes.base import SandboxCrashedError, SandboxError
from sandboxes.desktop.transport import Channel, Transport

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STDERR_TAIL_BYTES = 8192
# Closing stdin lets the guest shut its session down itself (a grace of {grace} x 0.1 s), then TERM,
# then KILL, each with a bounded wait (20 x 0.1 s) while a member of the group is alive. Zombies do
# not count (`kill -0` would, and an init that reaps slowly would stretch every wait), so members
# are read from /proc; without /proc the waits are skipped. POSIX sh: dash's kill takes no `--`.
_KILL_GROUP = (
    "live() {{ for f in /proc/[0-9]*/stat; do {{ read -r l < $f; }} 2>/dev/null || continue; "
    'l=${{l##*) }}; set -- $l; [ "$3" = {pgid} ] && [ "$1" != Z ] && return 0; done; return 1; }}; '
    "for s in 0 TERM KILL; do n=20; [ $s = 0 ] && n={grace} || kill -$s -{pgid} 2>/dev/null; i=0; "
    "while live && [ $i -lt $n ]; do sleep 0.1; i=$((i+1)); done; done; true"
)


class SshError(SandboxError):
    """The target could not be reached, refused our key, or a remote command failed."""


class SshUnreachableError(SshError, SandboxCrashedError):
    """The connection could not be (re)opened: for the runner, the sandbox's machine is gone."""


class HostKeyError(SshError):
    """The server's host key is unknown (and not accepted) or differs from the recorded one."""


@dataclass(frozen=True)
class SshTarget:
    """Where and how to connect. `known_hosts` is this target's own file, OpenSSH format."""

    host: str
    user: str
    key_file: str
    known_hosts: str
    port: int = 22
    accept_unknown_host: bool = False
    connect_timeout_s: float = 10.0
    command_timeout_s: float = 30.0
    keepalive_s: int = 15
    reconnect_attempts: int = 3
    shell: str = "posix"  # "posix" (Linux, macOS) or "windows" (Win32-OpenSSH, untested here)

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"SSH port {self.port} is out of range 1-65535")
        if self.shell not in ("posix", "windows"):
            raise ValueError(f"shell must be 'posix' or 'windows', not {self.shell!r}")
        if self.reconnect_attempts < 1:
            raise ValueError("reconnect_attempts must be at least 1")

    @classmethod
    def parse(cls, spec: str, key_file: str, known_hosts: str, **options: object) -> SshTarget:
        """`user@host` or `user@host:port` (the collector's `--ssh` form)."""
        match = re.fullmatch(r"([^@\s]+)@(\[[^\]]+\]|[^:@\s]+)(?::(\d+))?", spec)
        if not match:
            raise ValueError(f"--ssh wants user@host or user@host:port, got {spec!r}")
        user, host, port = match.group(1), match.group(2).strip("[]"), match.group(3)
        return cls(host, user, key_file, known_hosts, port=int(port or 22), **options)  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def is_this_host(self) -> bool:
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"


class _RefuseUnknownHost(paramiko.MissingHostKeyPolicy):
    def __init__(self, target: SshTarget) -> None:
        self.target = target

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        t = self.target
        raise HostKeyError(
            f"host key of {hostname} ({key.get_name()} {key.fingerprint}) is not in {t.known_hosts}. "
            f"Check that fingerprint with the machine's owner, then add it "
            f"(ssh-keyscan -p {t.port} {t.host} >> {t.known_hosts}), or opt in to trusting it on "
            f"first use (accept_unknown_host=True, --accept-unknown-host), which records it there."
        )


class _RecordUnknownHost(paramiko.MissingHostKeyPolicy):
    """The opt-in: trust on first use, and write the key down so later connections check it."""

    def __init__(self, known_hosts: str) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        with open(self.known_hosts, "a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


class SshChannel(Channel):
    """A program started by `SshTransport.spawn`: its stdin/stdout lines, its stderr kept for errors."""

    def __init__(self, transport: SshTransport, chan: paramiko.Channel, argv: list[str]) -> None:
        self._transport, self._chan, self._argv = transport, chan, argv
        self._out, self._err = bytearray(), bytearray()
        self._ended = False
        self.pgid: int | None = None
        self.killed = False

    def _stderr_tail(self) -> str:
        del self._err[:-_STDERR_TAIL_BYTES]
        lines = self._err.decode(errors="replace").strip().splitlines()[-10:]
        return " | ".join(lines) if lines else "(no stderr)"

    def _gone(self) -> SandboxCrashedError:
        name = shlex.join(self._argv[:2])
        if not self._transport.connected():
            why = f"the SSH connection to {self._transport.target.label} dropped while {name} was running"
        else:
            status = self._chan.recv_exit_status() if self._chan.status_event.wait(1.0) else "unknown"
            while self._chan.recv_stderr_ready():  # sshd sends the last output before the status
                self._err += self._chan.recv_stderr(65536)
            why = f"{name} on {self._transport.target.label} exited (status {status})"
        return SandboxCrashedError(f"{why}; its last stderr: {self._stderr_tail()}")

    def send_line(self, line: str) -> None:
        if not self.alive():
            raise self._gone()
        try:
            self._chan.sendall((line + "\n").encode())
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise self._gone() from exc

    def recv_line(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            newline = self._out.find(b"\n")
            if newline >= 0:
                line = bytes(self._out[:newline])
                del self._out[: newline + 1]
                return line.decode(errors="replace")
            if self._ended or self.killed:
                raise self._gone()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"no line from {shlex.join(self._argv[:2])} on {self._transport.target.label} "
                    f"within {timeout_s:.1f}s"
                )
            self._read(min(remaining, 0.5))

    def _read(self, wait_s: float) -> None:
        """Block on stdout like a bare paramiko reader (no select round trip), stderr drained on
        the way so that unread error output cannot fill the channel's window and stall stdout."""
        while self._chan.recv_stderr_ready():
            self._err += self._chan.recv_stderr(65536)
        self._chan.settimeout(wait_s)
        try:
            data = self._chan.recv(65536)
        except TimeoutError:
            return
        self._out += data
        self._ended = not data

    def finish(self, deadline: float) -> tuple[int, str, str]:
        """For a one-shot command: read to its end, then (exit status, stdout, stderr)."""
        self._chan.shutdown_write()
        while not self._ended:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{shlex.join(self._argv)} on {self._transport.target.label} timed out")
            self._read(min(deadline - time.monotonic(), 0.5))
        if not self._chan.status_event.wait(max(deadline - time.monotonic(), 0.1)):
            raise TimeoutError(
                f"{shlex.join(self._argv)} on {self._transport.target.label} gave no exit status"
            )
        while self._chan.recv_stderr_ready():
            self._err += self._chan.recv_stderr(65536)
        return (
            self._chan.recv_exit_status(),
            self._out.decode(errors="replace"),
            self._err.decode(errors="replace"),
        )

    def alive(self) -> bool:
        return not (self.killed or self._ended or self._chan.closed or self._chan.exit_status_ready())

    def kill(self) -> None:
        if self.killed:
            return
        program_ended = self._ended or self._chan.exit_status_ready()
        self.killed = True
        self._chan.close()
        if self.pgid is not None:  # no grace when the program is gone: nothing is shutting down
            self._transport.kill_group(self.pgid, grace_s=0.0 if program_ended else 2.0)


class SshTransport(Transport):
    """One SSH target for one desktop sandbox: spawn, file copy, a private work directory."""

    kind = "ssh"

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()
        self._channels: list[SshChannel] = []
        self._workdir: str | None = None
        self._closed = False

    # -- connection --------------------------------------------------------------------------
    def connected(self) -> bool:
        transport = self._client.get_transport() if self._client else None
        return bool(transport and transport.is_active())

    def _connect_once(self) -> paramiko.SSHClient:
        t = self.target
        client = paramiko.SSHClient()
        if Path(t.known_hosts).exists():
            client.load_host_keys(t.known_hosts)
        if t.accept_unknown_host:
            client.set_missing_host_key_policy(_RecordUnknownHost(t.known_hosts))
        else:
            client.set_missing_host_key_policy(_RefuseUnknownHost(t))
        try:
            key = paramiko.PKey.from_path(t.key_file)
        except (OSError, ValueError, paramiko.SSHException, paramiko.UnknownKeyType) as exc:
            raise SshError(f"cannot read the private key {t.key_file}: {exc}") from exc
        try:
            client.connect(
                t.host, t.port, username=t.user, pkey=key, timeout=t.connect_timeout_s,
                banner_timeout=t.connect_timeout_s, auth_timeout=t.connect_timeout_s,
                channel_timeout=t.connect_timeout_s, allow_agent=False, look_for_keys=False,
            )  # fmt: skip
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyError(
                f"host key of {t.label} ({exc.key.get_name()} {exc.key.fingerprint}) does NOT match the "
                f"one recorded in {t.known_hosts} ({exc.expected_key.fingerprint}): the machine was "
                f"reinstalled or someone is in between. If the change is expected, remove the old "
                f"line (ssh-keygen -R '[{t.host}]:{t.port}' -f {t.known_hosts}) and add the new key."
            ) from exc
        except paramiko.AuthenticationException as exc:
            client.close()
            raise SshError(
                f"{t.label} refused the key {t.key_file} ({exc}); add its public half "
                f"({t.key_file}.pub) to ~{t.user}/.ssh/authorized_keys on that machine"
            ) from exc
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(t.keepalive_s)
        return client

    def _connection(self) -> paramiko.SSHClient:
        """A live connection, reconnecting (bounded attempts, growing pauses) when it dropped."""
        with self._lock:
            if self._closed:
                raise SshError(f"the SSH transport to {self.target.label} is closed")
            if self._client is not None and self.connected():
                return self._client
            if self._client is not None:
                self._client.close()
                self._client = None
            last: Exception | None = None
            for attempt in range(self.target.reconnect_attempts):
                try:
                    self._client = self._connect_once()
                    return self._client
                except SshError:
                    raise
                except (OSError, EOFError, paramiko.SSHException) as exc:
                    last = exc
                    time.sleep(min(0.5 * 2**attempt, 4.0))
            raise SshUnreachableError(
                f"cannot connect to {self.target.label} after {self.target.reconnect_attempts} "
                f"attempts: {last}; check that sshd runs there and the port is reachable"
            )

    def _open(self, command: str) -> paramiko.Channel:
        """Start `command` on a session channel; one fresh connection if the old one was dead."""
        for retry in (False, True):
            client = self._connection()
            try:
                transport = client.get_transport()
                assert transport is not None
                chan = transport.open_session(timeout=self.target.connect_timeout_s)
                chan.exec_command(command)
                return chan
            except (OSError, EOFError, paramiko.SSHException) as exc:
                if retry:
                    raise SshUnreachableError(
                        f"cannot start a command on {self.target.label}: {exc}"
                    ) from exc
                with self._lock:
                    client.close()
        raise AssertionError("unreachable")

    # -- commands ----------------------------------------------------------------------------
    def command_line(self, argv: list[str]) -> str:
        """`argv` as one command line for the target's login shell (no local shell involved)."""
        if self.target.shell == "windows":
            return subprocess.list2cmdline(argv)
        return shlex.join(argv)

    def run(self, argv: list[str], timeout_s: float | None = None) -> tuple[int, str, str]:
        """Run `argv` once on the target: (exit status, stdout, stderr). TimeoutError when slow."""
        limit = self.target.command_timeout_s if timeout_s is None else timeout_s
        command = SshChannel(self, self._open(self.command_line(argv)), argv)
        try:
            status, out, err = command.finish(time.monotonic() + limit)
        finally:
            command._chan.close()
        if status == -1 and not self.connected():
            raise SshUnreachableError(
                f"the connection to {self.target.label} dropped during {shlex.join(argv)}"
            )
        return status, out, err

    def check(self, argv: list[str], timeout_s: float | None = None) -> str:
        """`run`, and its stdout; SshError with its stderr when it fails."""
        status, out, err = self.run(argv, timeout_s)
        if status != 0:
            raise SshError(f"{shlex.join(argv)} on {self.target.label} failed ({status}): {err.strip()}")
        return out

    def spawn(self, argv: list[str], env: dict[str, str]) -> SshChannel:
        bad = [name for name in env if not _ENV_NAME.match(name)]
        if bad:
            raise ValueError(f"environment variable names must be identifiers, got {bad}")
        assigned = [f"{name}={value}" for name, value in env.items()]
        if self.target.shell == "windows":
            sets = "".join(f'set "{pair}"&& ' for pair in assigned)
            chan = SshChannel(self, self._open(sets + self.command_line(argv)), argv)
        else:
            # sh prints its pid (= the new session's process group id), then becomes the program.
            wrapper = ["setsid", "-w", "sh", "-c", 'echo "$$"; exec "$@"', "sh", "env", *assigned, *argv]
            chan = SshChannel(self, self._open("exec " + shlex.join(wrapper)), argv)
            first = chan.recv_line(self.target.connect_timeout_s)
            if not first.isdigit():
                chan.kill()
                raise SshError(f"could not start {argv[0]} on {self.target.label}: {first!r}")
            chan.pgid = int(first)
        self._channels = [c for c in self._channels if not c.killed] + [chan]
        return chan

    def kill_group(self, pgid: int, grace_s: float = 2.0) -> None:
        """Stop a spawned process group (bounded); quiet if the target cannot be reached."""
        script = _KILL_GROUP.format(pgid=pgid, grace=round(grace_s * 10))
        try:
            self.run(["sh", "-c", script], timeout_s=grace_s + 10.0)
        except (SshError, TimeoutError):
            pass

    # -- files -------------------------------------------------------------------------------
    def put_file(self, local: Path, remote: str) -> None:
        client = self._connection()
        try:
            with client.open_sftp() as sftp:
                sftp.put(str(local), remote)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise SshError(f"copying {local} to {self.target.label}:{remote} failed: {exc}") from exc

    def workdir(self) -> str:
        if self._workdir is None:
            if self.target.shell == "windows":
                script = (
                    "$d = Join-Path $env:TEMP ('awm-desktop-' + [guid]::NewGuid()); "
                    "New-Item -ItemType Directory $d | Out-Null; $d"
                )
                made = self.check(["powershell", "-NoProfile", "-Command", script])
            else:
                made = self.check(["mktemp", "-d", "-t", "awm-desktop.XXXXXXXX"])
            self._workdir = made.strip()
        return self._workdir

    def resources(self) -> list[str]:
        # Only checkable on this host: a remote pid or path says nothing about local ones.
        if not self.target.is_this_host:
            return []
        held = [f"pid:{c.pgid}" for c in self._channels if c.pgid is not None]
        return held + ([f"path:{self._workdir}"] if self._workdir else [])

    def abandon(self) -> None:
        """Drop the connection without cleaning up on the target (it is known to be gone)."""
        self._closed = True
        self._channels.clear()
        if self._client is not None:
            self._client.close()
            self._client = None

    def close(self) -> None:
        if self._closed:
            return
        try:
            for chan in self._channels:
                chan.kill()
            if self._workdir is not None:
                remove = (
                    ["cmd", "/c", "rmdir", "/s", "/q"]
                    if self.target.shell == "windows"
                    else ["rm", "-rf", "--"]
                )
                try:
                    self.run([*remove, self._workdir], timeout_s=10.0)
                except (SshError, TimeoutError):
                    pass
        finally:
            self.abandon()

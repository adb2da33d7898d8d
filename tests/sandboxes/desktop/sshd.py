"""A real OpenSSH server on 127.0.0.1 for tests: its own host key, user key and known-hosts file.

    with LocalSshd(tmp_path) as sshd:
        transport = SshTransport(sshd.target())

`sshd -D -e -f <config>` runs in the foreground with a generated ed25519 host key, key-only
authentication for the current user from a generated ed25519 key, and nothing forwarded.
`restart()` kills the server AND its per-connection processes (what a reboot or a network cut
does to open sessions, unlike `systemctl restart ssh`), then starts it again on the same port with
the same host key. Other test modules use it directly or through `local_sshd`; wrap it in a
module-scoped fixture so one server serves the module.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from sandboxes.checks import children
from sandboxes.desktop.ssh import SshTarget

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
START_TIMEOUT_S = 10.0


def keygen(path: Path) -> Path:
    """A new passphrase-less ed25519 key pair at `path` and `path.pub`."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class LocalSshd:
    """One sshd on a free loopback port; files under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.user = getpass.getuser()
        self.host_key = keygen(self.root / "host_ed25519")
        self.user_key = keygen(self.root / "user_ed25519")
        (self.root / "authorized_keys").write_text((self.root / "user_ed25519.pub").read_text())
        self.port = _free_port()
        self.known_hosts = self.root / "known_hosts"
        host_pub = (self.root / "host_ed25519.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.log = self.root / "sshd.log"
        self._proc: subprocess.Popen | None = None

    def _config(self) -> Path:
        config = self.root / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key}",
                    "PidFile none",
                    f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
                    "StrictModes no",  # the key files live in a test's temporary directory
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    f"AllowUsers {self.user}",
                    "AllowAgentForwarding no",
                    "AllowTcpForwarding no",
                    "X11Forwarding no",
                    "PermitTunnel no",
                    "MaxSessions 50",
                    "MaxStartups 50",
                    "Subsystem sftp internal-sftp",
                    "",
                ]
            )
        )
        return config

    def start(self) -> LocalSshd:
        # Privilege separation needs this directory (root-owned, not writable by others).
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self._config())],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"sshd exited ({self._proc.returncode}): {self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1) as s:
                s.settimeout(1)
                if s.recv(64).startswith(b"SSH-"):
                    return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sshd gave no banner on port {self.port} in {START_TIMEOUT_S}s: {self.log}")

    def stop(self) -> None:
        """Kill the listener and every per-connection sshd under it (not the users' programs)."""
        if self._proc is None:
            return
        sessions, frontier = [], [self._proc.pid]
        while frontier:
            for child in children(frontier.pop()):
                if _comm(child).startswith("sshd"):
                    sessions.append(child)
                    frontier.append(child)
        for pid in [self._proc.pid, *sessions]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._proc.wait(timeout=10)
        self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def target(self, **options: object) -> SshTarget:
        fields: dict = {"key_file": str(self.user_key), "known_hosts": str(self.known_hosts)}
        fields.update(options)
        return SshTarget(host="127.0.0.1", port=self.port, user=self.user, **fields)

    def __enter__(self) -> LocalSshd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def local_sshd(root: Path) -> Iterator[LocalSshd]:
    """`LocalSshd(root)` started, stopped on exit."""
    with LocalSshd(root) as sshd:
        yield sshd

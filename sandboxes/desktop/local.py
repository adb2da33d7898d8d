"""LocalTransport: the guest agent in a bubblewrap sandbox on this host.

The sandbox has a root filesystem of its own (`sandboxes.jail`: the host's system directories and
an allow-listed /etc read-only, nothing of its homes, checkouts or data), its own /tmp, /run and
/dev/shm (so the host's X sockets under /tmp/.X11-unix and its D-Bus sockets under /run are out of
sight), no network namespace shared with the host (so no abstract X socket of the host's display is
reachable either), its own pid namespace (every process dies with the sandbox's init), and an empty
environment, bwrap's own included (no DISPLAY, no DBUS_SESSION_BUS_ADDRESS, no XAUTHORITY, none of
the collector's keys). Resources are bounded like the terminal's bwrap backend: a cgroup where the
host allows it, rlimits otherwise.
"""

from __future__ import annotations

import collections
import os
import queue
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from sandboxes.base import SandboxCrashedError, SandboxError
from sandboxes.containment import kill_cgroup, sandbox_tmpdir
from sandboxes.desktop.transport import Channel, Transport
from sandboxes.jail import AGENT_UID, SANDBOX_PATH, Jail
from sandboxes.terminal.backends import bwrap_limits, make_cgroups, remove_cgroup
from sandboxes.terminal.config import BwrapBackend, parse_memory

_EOF = object()
STDERR_LINES = 40
BASE_ENV = {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8", "USER": "agent"}


class LocalChannel(Channel):
    """A process on this host, its stdout read line by line by a thread, its stderr's tail kept."""

    def __init__(self, argv: list[str], cwd: str) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            start_new_session=True,  # a Ctrl-C to the collector does not reach the desktop directly
        )
        self._lines: queue.Queue[object] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self._lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self._lines.put(_EOF)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self._stderr.append(raw.decode("utf-8", "replace").rstrip())

    def _gone(self) -> SandboxCrashedError:
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        how = f"exited with status {code}" if code is not None and code >= 0 else f"was killed ({code})"
        tail = "\n".join(self._stderr)
        return SandboxCrashedError(f"desktop guest {how}" + (f"; its last messages:\n{tail}" if tail else ""))

    def send_line(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise self._gone() from exc

    def recv_line(self, timeout_s: float) -> str:
        try:
            item = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise TimeoutError(f"desktop guest sent nothing for {timeout_s:g}s") from None
        if item is _EOF:
            self._lines.put(_EOF)  # every later call sees the end too
            raise self._gone()
        return str(item)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


class LocalTransport(Transport):
    """One bubblewrap sandbox per transport: a private directory, a cgroup, the guest inside."""

    kind = "local"

    def __init__(self, limits: BwrapBackend | None = None) -> None:
        if shutil.which("bwrap") is None:
            raise SandboxError("local desktop needs bubblewrap: apt-get install bubblewrap")
        self.limits = limits or BwrapBackend(memory="2g", pids_limit=512, cpu_seconds=3600)
        self.mode = bwrap_limits(self.limits)
        self._dir = sandbox_tmpdir("desktop")
        # The jail's own /etc files live beside the sandbox's directory, out of the guest's sight.
        self._etc_dir = sandbox_tmpdir("desktop-etc")
        os.chmod(self._etc_dir, 0o755)
        self.jail = Jail(self._etc_dir, "desktop", self.limits.ro_paths)
        self.host_uid = self.jail.host_uid
        os.chmod(self._dir, 0o700)
        if os.geteuid() == 0:
            os.chown(self._dir, self.host_uid, self.host_uid)
        self.cgroups: list[str] = []
        if self.mode == "cgroup":
            try:
                self.cgroups = make_cgroups("desktop", self.limits)
            except OSError as exc:
                shutil.rmtree(self._dir, ignore_errors=True)
                shutil.rmtree(self._etc_dir, ignore_errors=True)
                raise SandboxError(f"local desktop: cannot set its cgroup limits: {exc}") from exc
        self.channels: list[LocalChannel] = []
        self._closed = False

    def workdir(self) -> str:
        return self._dir  # bound at the same path inside the sandbox

    def put_file(self, local: Path, remote: str) -> None:
        if not os.path.abspath(remote).startswith(self._dir + os.sep):
            raise SandboxError(f"put_file: {remote} is not under the sandbox directory {self._dir}")
        shutil.copyfile(local, remote)
        os.chmod(remote, 0o644)
        if os.geteuid() == 0:
            os.chown(remote, self.host_uid, self.host_uid)

    def bwrap_argv(self, argv: list[str], env: dict[str, str]) -> list[str]:
        """The full command line that runs `argv` in the sandbox."""
        # The X socket directory as a root-run system makes it: sticky, writable by all.
        own = ["--tmpfs", "/dev/shm", "--perms", "01777", "--dir", "/tmp/.X11-unix"]
        wrapped = ["bwrap", *self.jail.mounts(*own, "--bind", self._dir, self._dir)]
        wrapped += ["--unshare-all", "--die-with-parent", "--new-session"]
        wrapped += ["--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--hostname", "desktop"]
        wrapped += ["--chdir", self._dir, "--clearenv"]
        for key, value in {**BASE_ENV, "HOME": self._dir, **env}.items():
            wrapped += ["--setenv", key, value]
        if self.mode == "rlimit":
            cfg = self.limits
            wrapped += ["prlimit", f"--as={parse_memory(cfg.memory)}", f"--nproc={cfg.pids_limit}"]
            wrapped += [f"--cpu={cfg.cpu_seconds}", "--"]
        return self.jail.launch([*wrapped, *argv], self.cgroups)

    def spawn(self, argv: list[str], env: dict[str, str]) -> LocalChannel:
        if self._closed:
            raise SandboxError("local desktop transport is closed")
        channel = LocalChannel(self.bwrap_argv(argv, env), cwd=self._dir)
        self.channels.append(channel)
        return channel

    def resources(self) -> list[str]:
        pids = [f"pid:{c.proc.pid}" for c in self.channels]
        return [f"path:{self._dir}", f"path:{self._etc_dir}", *pids, *(f"path:{c}" for c in self.cgroups)]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for channel in self.channels:
            channel.kill()
        for cgroup in self.cgroups:
            kill_cgroup(cgroup)
            remove_cgroup(cgroup)
        shutil.rmtree(self._dir, ignore_errors=True)
        shutil.rmtree(self._etc_dir, ignore_errors=True)

"""Where an MCP server process runs: inside bwrap (default) or on the host (`local`, when asked).

The bwrap sandbox follows the terminal sandbox's: the host's root read-only, private /tmp, /run,
/home and /root, the server's private workdir and state directory at fixed paths
(`/home/agent/workdir`, `/home/agent/state`, so recorded paths repeat across runs), no network unless
the entry asks, its own pid and IPC namespaces, an unprivileged user, and cgroup (or rlimit) bounds
from the terminal's `BwrapBackend` settings. The server's package, the Python it links to and the
command's own files (`binds.py`) are bound read-only at their own paths, since they may live under
root's private home (pyenv, the cache) or under the hidden /tmp (a checkout there).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from sandboxes.base import SandboxError
from sandboxes.containment import ProcessBox
from sandboxes.mcp.binds import HIDDEN_IN_JAIL
from sandboxes.terminal.backends import AGENT_UID, BWRAP_HOST_UID, bwrap_limits, make_cgroups, remove_cgroup
from sandboxes.terminal.config import BwrapBackend, LocalBackend

WORKDIR_IN_SANDBOX = "/home/agent/workdir"
STATE_IN_SANDBOX = "/home/agent/state"
HOME_IN_SANDBOX = "/home/agent"
# Runs first, as the sandbox's own user: writes its pid (exec keeps it, so it is the server's or
# bwrap's) for the sandbox to watch the process the SDK's stdio transport spawns, joins the
# cgroups, then execs the rest. Arguments: PIDFILE N CGROUP_PROCS... ARGV...
LAUNCHER = """
echo $$ > "$1"; shift
n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n-1)); done
exec "$@"
"""
# As root, in a private mount namespace (`unshare --mount`): bind each directory the server needs
# (its package, the Python it links to; maybe under root's 0700 home) onto a mount point in the
# jail, where the unprivileged user bwrap then runs as can reach it. Arguments: N (SRC DST)... ARGV...
MOUNTER = """
n=$1; shift; while [ "$n" -gt 0 ]; do mount --bind "$1" "$2" || exit 126; shift 2; n=$((n-1)); done
exec "$@"
"""
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


class ServerJail:
    """The private directories of one server process and the argv that runs it isolated."""

    def __init__(self, backend: BwrapBackend | LocalBackend, tmpdir: Path) -> None:
        self.backend = backend
        self.tmpdir = tmpdir
        self.workdir = tmpdir / "workdir"
        self.state = tmpdir / "state"
        self.home = tmpdir / "home"
        self.pidfile = tmpdir / "server.pid"
        for path in (self.workdir, self.state, self.home):
            path.mkdir()
        self.limits = "none"
        self.cgroups: list[str] = []
        # On the host the server and all it starts stay in a box: nothing it leaves outlives it.
        self.box = ProcessBox() if isinstance(backend, LocalBackend) else None
        if isinstance(backend, BwrapBackend):
            if shutil.which("bwrap") is None:
                raise SandboxError(
                    "bwrap not found (apt-get install bubblewrap), or choose the local backend"
                )
            self.limits = bwrap_limits(backend)
            if self.limits == "cgroup":
                try:
                    self.cgroups = make_cgroups(f"agentworld-mcp-{uuid.uuid4().hex[:12]}", backend)
                except OSError as exc:
                    raise SandboxError(f"bwrap sandbox: cannot set its cgroup limits: {exc}") from exc

    @property
    def isolated(self) -> bool:
        return isinstance(self.backend, BwrapBackend)

    def placeholders(self) -> dict[str, str]:
        """What `{workdir}` and `{state}` mean to the server: its own view of the directories."""
        if self.isolated:
            return {"workdir": WORKDIR_IN_SANDBOX, "state": STATE_IN_SANDBOX}
        return {"workdir": str(self.workdir), "state": str(self.state)}

    def hand_over(self) -> None:
        """Give the private directories to the unprivileged user the server runs as (when root)."""
        if self.isolated and os.geteuid() == 0:
            for top in (self.workdir, self.state, self.home):
                for root, dirs, files in os.walk(top):
                    for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                        os.lchown(name, BWRAP_HOST_UID, BWRAP_HOST_UID)

    def server_argv(
        self, program: list[str], env: dict[str, str], cwd: str, network: bool, binds: list[Path]
    ) -> tuple[list[str], dict[str, str], str | None]:
        """(argv, environment, host cwd) that run `program` in this jail, pid written to `pidfile`."""
        if not self.isolated:
            host_env = {"HOME": str(self.home), "PATH": os.environ.get("PATH", SANDBOX_PATH), **env}
            assert self.box is not None
            argv = self.box.wrap([*_launcher(self.pidfile, []), *program])
            return argv, host_env, cwd or str(self.workdir)
        as_root = os.geteuid() == 0
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for hidden in HIDDEN_IN_JAIL:
            argv += ["--tmpfs", hidden]
        mounts: list[str] = []
        for index, path in enumerate(binds):  # after the tmpfs mounts: paths under /root stay visible
            source = path
            if as_root:
                source = self.tmpdir / "binds" / str(index)
                source.parent.mkdir(exist_ok=True)
                if path.is_dir():
                    source.mkdir()
                else:  # a file is bound onto a file
                    source.touch()
                mounts += [str(path), str(source)]
            argv += ["--ro-bind", str(source), str(path)]
        argv += ["--bind", str(self.home), HOME_IN_SANDBOX]
        argv += ["--bind", str(self.workdir), WORKDIR_IN_SANDBOX, "--bind", str(self.state), STATE_IN_SANDBOX]
        argv += ["--unshare-all", "--die-with-parent", "--hostname", "sandbox"]
        if network:
            argv += ["--share-net"]
        argv += ["--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--chdir", cwd or WORKDIR_IN_SANDBOX]
        argv += ["--clearenv", "--setenv", "HOME", HOME_IN_SANDBOX, "--setenv", "PATH", SANDBOX_PATH]
        argv += ["--setenv", "LANG", "C.UTF-8"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        if self.limits == "rlimit":
            # Memory is left to cgroups: Node reserves gigabytes of address space, so RLIMIT_AS breaks it.
            argv += [
                "prlimit",
                f"--nproc={self.backend.pids_limit}",
                f"--cpu={self.backend.cpu_seconds}",
                "--",
            ]
        argv += program
        if as_root:
            argv = [
                "setpriv",
                f"--reuid={BWRAP_HOST_UID}",
                f"--regid={BWRAP_HOST_UID}",
                "--clear-groups",
                *argv,
            ]
            if mounts:
                mounter = ["sh", "-c", MOUNTER, "sh", str(len(mounts) // 2), *mounts]
                argv = ["unshare", "--mount", "--propagation", "private", *mounter, *argv]
        procs = [os.path.join(c, "cgroup.procs") for c in self.cgroups]
        return [*_launcher(self.pidfile, procs), *argv], {}, None

    def server_pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def resources(self) -> list[str]:
        held = self.box.resources() if self.box else []
        return [f"path:{self.tmpdir}", *(f"path:{c}" for c in self.cgroups), *held]

    def destroy(self) -> None:
        if self.box is not None:
            self.box.close()
            self.box = None
        for cgroup in self.cgroups:
            remove_cgroup(cgroup)
        self.cgroups = []
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def _launcher(pidfile: Path, cgroup_procs: list[str]) -> list[str]:
    return ["sh", "-c", LAUNCHER, "sh", str(pidfile), str(len(cgroup_procs)), *cgroup_procs]

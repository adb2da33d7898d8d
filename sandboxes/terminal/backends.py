"""Where the shell runs: one environment instance per episode, made from a backend config.

An instance owns what it created (a container, a private home, a cgroup) and gives the argv
that the tmux pane runs. The pane's pty belongs to the sandbox alone, so bwrap's --new-session
(a defence against TIOCSTI injection into a shared terminal) is not needed, and it would take
the controlling terminal away from bash, breaking C-c and job control.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
import uuid

from sandboxes.base import SandboxError
from sandboxes.terminal.config import Backend, BwrapBackend, DockerBackend, LocalBackend, parse_memory
from sandboxes.terminal.reaper import OWNER_LABEL, owner

log = logging.getLogger(__name__)

AGENT_UID = 1000
RC_IN_SANDBOX = "/tmp/.agentworld-bashrc"
SHELL_ENV = {"LANG": "C.UTF-8", "TERM": "xterm-256color"}
# The uid bwrap runs as when we are root: an unprivileged user namespace owned by `nobody`
# cannot read root's files or reach root-only sockets (docker.sock) on the host.
BWRAP_HOST_UID = 65534


class Instance:
    """One isolated environment; subclasses fill in how it is made and torn down."""

    backend = ""

    def __init__(self, tmpdir: str, rc_path: str) -> None:
        self.tmpdir = tmpdir
        self.rc_path = rc_path
        self.workdir = tmpdir

    def shell_argv(self) -> list[str]:
        raise NotImplementedError

    def crash_reason(self) -> str:
        return "the shell exited"

    def resources(self) -> list[str]:
        return [f"path:{self.tmpdir}"]

    def destroy(self) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)


class DockerInstance(Instance):
    backend = "docker"

    def __init__(self, cfg: DockerBackend, tmpdir: str, rc_path: str) -> None:
        super().__init__(tmpdir, rc_path)
        self.name = f"agentworld-terminal-{uuid.uuid4().hex[:12]}"
        argv = ["docker", "run", "-d", "--name", self.name, "--hostname", "sandbox", "--init"]
        argv += ["--label", "agentworld.sandbox=terminal", "--label", f"{OWNER_LABEL}={owner()}"]
        argv += ["--cpus", str(cfg.cpus), "--memory", cfg.memory]
        argv += ["--memory-swap", cfg.memory, "--pids-limit", str(cfg.pids_limit)]
        argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        argv += ["-v", f"{rc_path}:{RC_IN_SANDBOX}:ro"]
        if not cfg.network:
            argv += ["--network", "none"]
        started = subprocess.run([*argv, cfg.image, "sleep", "infinity"], capture_output=True, text=True)
        if started.returncode != 0:
            hint = ""
            if "No such image" in started.stderr or "Unable to find image" in started.stderr:
                hint = " (build it with: bash infra/terminal-image/build.sh)"
            raise SandboxError(f"docker run {cfg.image} failed{hint}: {started.stderr.strip()}")
        self.container_id = started.stdout.strip()

    def shell_argv(self) -> list[str]:
        env = [a for k, v in SHELL_ENV.items() for a in ("-e", f"{k}={v}")]
        shell = ["bash", "--noprofile", "--rcfile", RC_IN_SANDBOX, "-i"]
        return ["docker", "exec", "-it", "-u", "agent", *env, self.container_id, *shell]

    def crash_reason(self) -> str:
        # The exec'd shell dies a moment before the engine marks a killed container as exited.
        deadline = time.monotonic() + 2.0
        while True:
            state = subprocess.run(
                ["docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}"]
                + [self.container_id],
                capture_output=True,
                text=True,
            )
            if state.returncode != 0:
                return "container is gone"
            status, code, oom = state.stdout.split()
            if status != "running":
                return f"container {status} ({code}){' after running out of memory' if oom == 'true' else ''}"
            if time.monotonic() > deadline:
                return "the shell exited"
            time.sleep(0.1)

    def resources(self) -> list[str]:
        return [*super().resources(), f"container:{self.container_id}"]

    def destroy(self) -> None:
        subprocess.run(["docker", "rm", "-f", "-v", self.container_id], capture_output=True)
        super().destroy()


class BwrapInstance(Instance):
    backend = "bwrap"

    def __init__(self, cfg: BwrapBackend, tmpdir: str, rc_path: str) -> None:
        super().__init__(tmpdir, rc_path)
        self.cfg = cfg
        self.home = os.path.join(tmpdir, "home")
        os.mkdir(self.home, 0o755)
        etc = {"passwd": f"agent:x:{AGENT_UID}:{AGENT_UID}:agent:/home/agent:/bin/bash\n"}
        etc["group"] = f"agent:x:{AGENT_UID}:\n"
        for name, content in etc.items():
            with open(os.path.join(tmpdir, name), "w") as f:
                f.write(content)
        self.host_uid = BWRAP_HOST_UID if os.geteuid() == 0 else os.geteuid()
        if os.geteuid() == 0:
            os.chown(self.home, self.host_uid, self.host_uid)
        self.cgroups = _make_cgroups(f"agentworld-{uuid.uuid4().hex[:12]}", cfg)

    def shell_argv(self) -> list[str]:
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        # Host /tmp, /run (docker.sock and friends) and homes stay out of sight.
        argv += ["--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/home", "--bind", self.home, "/home/agent"]
        argv += ["--ro-bind", os.path.join(self.tmpdir, "passwd"), "/etc/passwd"]
        argv += ["--ro-bind", os.path.join(self.tmpdir, "group"), "/etc/group"]
        argv += ["--ro-bind", self.rc_path, RC_IN_SANDBOX, "--unshare-all", "--die-with-parent"]
        if self.cfg.network:
            argv += ["--share-net"]
        argv += ["--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--hostname", "sandbox"]
        argv += ["--chdir", "/home/agent", "--clearenv", "--setenv", "HOME", "/home/agent"]
        argv += ["--setenv", "USER", "agent", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin"]
        argv += [a for k, v in SHELL_ENV.items() for a in ("--setenv", k, v)]
        argv += ["bash", "--noprofile", "--rcfile", RC_IN_SANDBOX, "-i"]
        if os.geteuid() == 0:
            argv = [
                "setpriv",
                f"--reuid={self.host_uid}",
                f"--regid={self.host_uid}",
                "--clear-groups",
                *argv,
            ]
        if self.cgroups:
            # The wrapper joins the cgroups before exec, so every sandbox process starts inside them.
            join = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1"; shift; n=$((n-1)); done; exec "$@"'
            procs = [os.path.join(c, "cgroup.procs") for c in self.cgroups]
            argv = ["sh", "-c", join, "sh", str(len(procs)), *procs, *argv]
        return argv

    def resources(self) -> list[str]:
        return [*super().resources(), *(f"path:{c}" for c in self.cgroups)]

    def destroy(self) -> None:
        for cgroup in self.cgroups:
            _remove_cgroup(cgroup)
        super().destroy()


class LocalInstance(Instance):
    backend = "local"

    def __init__(self, cfg: LocalBackend, tmpdir: str, rc_path: str) -> None:
        super().__init__(tmpdir, rc_path)
        self.workdir = os.path.join(tmpdir, "home")
        os.mkdir(self.workdir)

    def shell_argv(self) -> list[str]:
        env = [f"{k}={v}" for k, v in SHELL_ENV.items()]
        return ["env", f"HOME={self.workdir}", *env, "bash", "--noprofile", "--rcfile", self.rc_path, "-i"]


def make_instance(cfg: Backend, tmpdir: str, rc_path: str) -> Instance:
    if isinstance(cfg, DockerBackend):
        return DockerInstance(cfg, tmpdir, rc_path)
    if isinstance(cfg, BwrapBackend):
        return BwrapInstance(cfg, tmpdir, rc_path)
    return LocalInstance(cfg, tmpdir, rc_path)


def _make_cgroups(name: str, cfg: BwrapBackend) -> list[str]:
    """Best effort memory and pids limits: cgroup v2, else v1 controllers, else none (logged)."""
    limits = {"memory": str(parse_memory(cfg.memory)), "pids": str(cfg.pids_limit)}
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        files = {"memory": "memory.max", "pids": "pids.max"}
        roots = {k: "/sys/fs/cgroup" for k in limits}
    else:
        files = {"memory": "memory.limit_in_bytes", "pids": "pids.max"}
        roots = {k: f"/sys/fs/cgroup/{k}" for k in limits}
    made: list[str] = []
    for controller, value in limits.items():
        path = os.path.join(roots[controller], name)
        try:
            if path not in made:
                os.mkdir(path)
                made.append(path)
            with open(os.path.join(path, files[controller]), "w") as f:
                f.write(value)
        except OSError as exc:
            log.warning("bwrap sandbox: no %s limit (cgroup %s: %s)", controller, path, exc)
    return made


def _remove_cgroup(path: str) -> None:
    # The kernel refuses rmdir while the killed processes are still exiting: retry for a while.
    deadline = time.monotonic() + 2.0
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                log.warning("could not remove cgroup %s: %s", path, exc)
                return
            time.sleep(0.01)

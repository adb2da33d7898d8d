"""Where the shell runs: one environment instance per episode, made from a backend config.

An instance owns what it created (a container, a private home, a cgroup) and gives the argv
that the tmux pane runs. The pane's pty belongs to the sandbox alone, so bwrap's --new-session
(a defence against TIOCSTI injection into a shared terminal) is not needed, and it would take
the controlling terminal away from bash, breaking C-c and job control.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
import uuid

from sandboxes.base import SandboxError
from sandboxes.containment import ProcessBox, join_cgroups_argv, remove_cgroup
from sandboxes.terminal.config import Backend, BwrapBackend, DockerBackend, LocalBackend, parse_memory
from sandboxes.terminal.reaper import OWNER_LABEL, owner, run_quietly

log = logging.getLogger(__name__)

AGENT_UID = 1000
RC_IN_SANDBOX = "/tmp/.agentworld-bashrc"
SHELL_ENV = {"LANG": "C.UTF-8", "TERM": "xterm-256color"}
# The uid bwrap runs as when we are root: an unprivileged user namespace owned by `nobody`
# cannot read root's files or reach root-only sockets (docker.sock) on the host.
BWRAP_HOST_UID = 65534


def _bash(script: str, args: tuple[str, ...]) -> list[str]:
    return ["bash", "--noprofile", "--norc", "-c", script, "bash", *args]


class Instance:
    """One isolated environment; subclasses fill in how it is made and torn down."""

    backend = ""

    def __init__(self, tmpdir: str, rc_path: str) -> None:
        self.tmpdir = tmpdir
        self.rc_path = rc_path
        self.workdir = tmpdir

    def shell_argv(self) -> list[str]:
        raise NotImplementedError

    def exec_argv(self, script: str, *args: str) -> list[str]:
        """argv that runs `bash -c script` (with `args` as $1...) in this environment, beside the
        pane's shell, as the agent user in its home: how a task's verifier reads the end state
        without typing into the agent's terminal, whatever the agent left running there."""
        raise NotImplementedError

    def crash_reason(self) -> str:
        return "the shell exited"

    def resources(self) -> list[str]:
        return [f"path:{self.tmpdir}"]

    def destroy(self) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)


class DockerInstance(Instance):
    backend = "docker"

    def __init__(self, cfg: DockerBackend, tmpdir: str, rc_path: str, box: ProcessBox | None = None) -> None:
        """`box`: the sandbox's process box, which removes the container if the collector dies."""
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
        argv += [cfg.image, "sleep", "infinity"]
        if box is not None:
            box.hold_container(self.name)
            argv = box.wrap(argv)
        started = run_quietly(argv)
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

    def exec_argv(self, script: str, *args: str) -> list[str]:
        env = [a for k, v in SHELL_ENV.items() for a in ("-e", f"{k}={v}")]
        return ["docker", "exec", "-u", "agent", *env, self.container_id, *_bash(script, args)]

    def crash_reason(self) -> str:
        # The exec'd shell dies a moment before the engine marks a killed container as exited.
        deadline = time.monotonic() + 2.0
        while True:
            state = run_quietly(
                ["docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}} {{.State.OOMKilled}}"]
                + [self.container_id]
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
        run_quietly(["docker", "rm", "-f", "-v", self.container_id])
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
        self.limits = bwrap_limits(cfg)
        self.cgroups: list[str] = []
        if self.limits == "cgroup":
            try:
                self.cgroups = make_cgroups(f"agentworld-{uuid.uuid4().hex[:12]}", cfg)
            except OSError as exc:
                raise SandboxError(f"bwrap sandbox: cannot set its cgroup limits: {exc}") from exc
        elif shutil.which("prlimit") is None:
            raise SandboxError("bwrap sandbox: prlimit not found (apt-get install util-linux)")

    def shell_argv(self) -> list[str]:
        return self._argv(["bash", "--noprofile", "--rcfile", RC_IN_SANDBOX, "-i"])

    def exec_argv(self, script: str, *args: str) -> list[str]:
        # A second namespace over the same private home and limits: it sees the files, not the
        # pane's processes.
        return self._argv(_bash(script, args))

    def _argv(self, shell: list[str]) -> list[str]:
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
        if self.limits == "rlimit":
            # Set inside the sandbox's user namespace: RLIMIT_NPROC then counts this sandbox's
            # processes only, not every process of the host user it maps to.
            cfg = self.cfg
            argv += ["prlimit", f"--as={parse_memory(cfg.memory)}", f"--nproc={cfg.pids_limit}"]
            argv += [f"--cpu={cfg.cpu_seconds}", "--"]
        argv += shell
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
            argv = join_cgroups_argv([os.path.join(c, "cgroup.procs") for c in self.cgroups], argv)
        return argv

    def resources(self) -> list[str]:
        return [*super().resources(), *(f"path:{c}" for c in self.cgroups)]

    def destroy(self) -> None:
        for cgroup in self.cgroups:
            remove_cgroup(cgroup)
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

    def exec_argv(self, script: str, *args: str) -> list[str]:
        env = [f"{k}={v}" for k, v in SHELL_ENV.items()]
        return ["env", f"HOME={self.workdir}", *env, *_bash(f'cd "$HOME" && {script}', args)]


def make_instance(cfg: Backend, tmpdir: str, rc_path: str, box: ProcessBox | None = None) -> Instance:
    if isinstance(cfg, DockerBackend):
        return DockerInstance(cfg, tmpdir, rc_path, box)
    if isinstance(cfg, BwrapBackend):
        return BwrapInstance(cfg, tmpdir, rc_path)
    return LocalInstance(cfg, tmpdir, rc_path)


_CGROUP_ROOT = "/sys/fs/cgroup"
_CPU_PERIOD_US = 100_000
_SWAP_FILES = frozenset({"memory.swap.max", "memory.memsw.limit_in_bytes"})


def _cgroup_settings(cfg: BwrapBackend) -> list[tuple[str, str, str]]:
    """(directory, file, value) per limit, for cgroup v2 or the v1 controllers."""
    memory, pids = str(parse_memory(cfg.memory)), str(cfg.pids_limit)
    quota = str(max(1000, int(cfg.cpus * _CPU_PERIOD_US)))
    if os.path.exists(os.path.join(_CGROUP_ROOT, "cgroup.controllers")):
        return [
            (_CGROUP_ROOT, "memory.max", memory),
            (_CGROUP_ROOT, "memory.swap.max", "0"),
            (_CGROUP_ROOT, "pids.max", pids),
            (_CGROUP_ROOT, "cpu.max", f"{quota} {_CPU_PERIOD_US}"),
        ]
    v1 = [
        ("memory", "memory.limit_in_bytes", memory),
        ("memory", "memory.memsw.limit_in_bytes", memory),
        ("pids", "pids.max", pids),
        ("cpu", "cpu.cfs_period_us", str(_CPU_PERIOD_US)),
        ("cpu", "cpu.cfs_quota_us", quota),
    ]
    return [(os.path.join(_CGROUP_ROOT, controller), file, value) for controller, file, value in v1]


def make_cgroups(name: str, cfg: BwrapBackend) -> list[str]:
    """The sandbox's cgroups with every limit set; OSError (nothing left behind) if one cannot be."""
    made: list[str] = []
    try:
        for root, file, value in _cgroup_settings(cfg):
            path = os.path.join(root, name)
            if path not in made:
                os.mkdir(path)
                made.append(path)
            control = os.path.join(path, file)
            if file in _SWAP_FILES and not os.path.exists(control):
                continue  # no swap accounting on this host: there is no swap to escape to
            with open(control, "w") as f:
                f.write(value)
    except OSError:
        for path in made:
            remove_cgroup(path)
        raise
    return made


@functools.cache
def _cgroups_usable() -> str | None:
    """None if this process can make limited cgroups, else why not."""
    try:
        for path in make_cgroups(f"agentworld-probe-{uuid.uuid4().hex[:12]}", BwrapBackend()):
            remove_cgroup(path)
    except OSError as exc:
        return str(exc)
    return None


def bwrap_limits(cfg: BwrapBackend) -> str:
    """How a bwrap sandbox of `cfg` is limited on this host: "cgroup" or "rlimit"."""
    if cfg.limits == "rlimit":
        return "rlimit"
    why = _cgroups_usable()
    if why is None:
        return "cgroup"
    if cfg.limits == "cgroup":
        raise SandboxError(
            f"bwrap sandbox: cgroup limits are not available here ({why}); run as root with a "
            "writable /sys/fs/cgroup, or choose rlimit limits (--limits rlimit)"
        )
    _warn_rlimit_once(why)
    return "rlimit"


@functools.cache
def _warn_rlimit_once(why: str) -> None:
    log.warning(
        "bwrap sandboxes: no cgroups here (%s); limiting each process with rlimits instead "
        "(memory per process, CPU time not rate)",
        why,
    )

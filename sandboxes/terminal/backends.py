"""Where the shell runs: one environment instance per episode, made from a backend config.

An instance owns what it created (a container, a private home, a cgroup) and gives the argv
that the tmux pane runs. The pane's pty belongs to the sandbox alone, so bwrap's --new-session
(a defence against TIOCSTI injection into a shared terminal) is not needed, and it would take
the controlling terminal away from bash, breaking C-c and job control.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import shutil
import time
import uuid

from sandboxes.base import SandboxError
from sandboxes.containment import LIMITS_PREFIX, ProcessBox, cgroup_name, own_cgroups, remove_cgroup
from sandboxes.jail import AGENT_UID, SANDBOX_PATH, Jail
from sandboxes.terminal.config import Backend, BwrapBackend, DockerBackend, LocalBackend, parse_memory
from sandboxes.terminal.reaper import OWNER_LABEL, owner, run_quietly

log = logging.getLogger(__name__)

RC_IN_SANDBOX = "/tmp/.agentworld-bashrc"
HOME_IN_SANDBOX = "/home/agent"
SHELL_ENV = {"LANG": "C.UTF-8", "TERM": "xterm-256color"}


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
        argv += [a for item in cfg.env for a in ("-e", item)]
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
    """bwrap over the sandbox's own root filesystem (`sandboxes.jail`): the system directories
    read-only, a private home, /tmp and /run, the backend's `ro_paths`, nothing else of the host."""

    backend = "bwrap"

    def __init__(self, cfg: BwrapBackend, tmpdir: str, rc_path: str) -> None:
        super().__init__(tmpdir, rc_path)
        self.cfg = cfg
        self.home = os.path.join(tmpdir, "home")
        os.mkdir(self.home, 0o755)
        missing = [p for p in cfg.ro_paths if not os.path.exists(p)]
        if missing:
            raise SandboxError(f"bwrap sandbox: ro_paths {', '.join(missing)} do not exist on this host")
        self.jail = Jail(tmpdir, "sandbox", cfg.ro_paths, cfg.network)
        self.host_uid = self.jail.host_uid
        if os.geteuid() == 0:
            os.chown(self.home, self.host_uid, self.host_uid)
        self.limits = bwrap_limits(cfg)
        self.cgroups: list[str] = []
        if self.limits == "cgroup":
            try:
                self.cgroups = make_cgroups("terminal", cfg)
            except OSError as exc:
                raise SandboxError(f"bwrap sandbox: cannot set its cgroup limits: {exc}") from exc
        elif shutil.which("prlimit") is None:
            raise SandboxError("bwrap sandbox: prlimit not found (apt-get install util-linux)")

    def shell_argv(self) -> list[str]:
        return self.sandbox_argv(["bash", "--noprofile", "--rcfile", RC_IN_SANDBOX, "-i"])

    def exec_argv(self, script: str, *args: str) -> list[str]:
        # A second namespace over the same private home and limits: it sees the files, not the
        # pane's processes.
        return self.sandbox_argv(_bash(script, args))

    def sandbox_argv(
        self,
        command: list[str],
        binds: tuple[str, ...] = (),
        chdir: str = HOME_IN_SANDBOX,
        path: str = SANDBOX_PATH,
    ) -> list[str]:
        """The argv that runs `command` in this sandbox, with further bwrap mount arguments
        `binds` (the SWE sandbox's repository), in `chdir`, with `path` as its PATH."""
        own = ["--bind", self.home, HOME_IN_SANDBOX, "--ro-bind", self.rc_path, RC_IN_SANDBOX, *binds]
        argv = ["bwrap", *self.jail.mounts(*own), "--unshare-all", "--die-with-parent"]
        if self.cfg.network:
            argv += ["--share-net"]
        argv += ["--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--hostname", "sandbox"]
        argv += ["--chdir", chdir, "--clearenv", "--setenv", "HOME", HOME_IN_SANDBOX]
        argv += ["--setenv", "USER", "agent", "--setenv", "PATH", path]
        argv += [a for k, v in SHELL_ENV.items() for a in ("--setenv", k, v)]
        if self.limits == "rlimit":
            # Set inside the sandbox's user namespace: RLIMIT_NPROC then counts this sandbox's
            # processes only, not every process of the host user it maps to.
            cfg = self.cfg
            argv += ["prlimit", f"--as={parse_memory(cfg.memory)}", f"--nproc={cfg.pids_limit}"]
            argv += [f"--cpu={cfg.cpu_seconds}", "--"]
        # The starter joins the cgroups before exec, so every sandbox process starts inside them.
        return self.jail.launch([*argv, *command], self.cgroups)

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


_CPU_PERIOD_US = 100_000
_SWAP_FILES = frozenset({"memory.swap.max", "memory.memsw.limit_in_bytes"})
_V2_CONTROLLERS = ("memory", "pids", "cpu")


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _cgroup_settings(cfg: BwrapBackend) -> list[tuple[str, str, str]]:
    """(parent directory, file, value) per limit: below this process's own cgroups, on cgroup v2
    where the unified hierarchy has the controllers, else on the v1 controllers."""
    memory, pids = str(parse_memory(cfg.memory)), str(cfg.pids_limit)
    quota = str(max(1000, int(cfg.cpus * _CPU_PERIOD_US)))
    own = own_cgroups()
    unified = own.get("")
    if unified is not None and set(_V2_CONTROLLERS) <= set(_read(f"{unified}/cgroup.controllers").split()):
        _delegate_v2(unified)
        return [
            (unified, "memory.max", memory),
            (unified, "memory.swap.max", "0"),
            (unified, "pids.max", pids),
            (unified, "cpu.max", f"{quota} {_CPU_PERIOD_US}"),
        ]
    v1 = [
        ("memory", "memory.limit_in_bytes", memory),
        ("memory", "memory.memsw.limit_in_bytes", memory),
        ("pids", "pids.max", pids),
        ("cpu", "cpu.cfs_period_us", str(_CPU_PERIOD_US)),
        ("cpu", "cpu.cfs_quota_us", quota),
    ]
    missing = sorted({controller for controller, _, _ in v1 if controller not in own})
    if missing:
        raise OSError(
            errno.ENOENT, f"no cgroup hierarchy of this process has the {', '.join(missing)} controller"
        )
    return [(own[controller], file, value) for controller, file, value in v1]


def _delegate_v2(parent: str) -> None:
    """Let the children of `parent` (the collector's own v2 cgroup) use the controllers. cgroup v2
    refuses that while `parent` holds processes itself ("no internal processes"), which a
    collector's own cgroup usually does: then say how to give it a cgroup of its own."""
    enabled = set(_read(f"{parent}/cgroup.subtree_control").split())
    wanted = [c for c in _V2_CONTROLLERS if c not in enabled]
    if not wanted:
        return
    try:
        with open(f"{parent}/cgroup.subtree_control", "w") as f:
            f.write(" ".join(f"+{c}" for c in wanted))
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"cannot enable {', '.join(wanted)} for cgroups below this process's own cgroup {parent} "
            f"({exc.strerror}; cgroup v2 allows that only in a cgroup without processes of its own: "
            "start the collector in a cgroup of its own, e.g. systemd-run --scope -p Delegate=yes)",
        ) from exc


def make_cgroups(kind: str, cfg: BwrapBackend) -> list[str]:
    """A `kind` sandbox's cgroups ("terminal", "mcp"...) with every limit set, below this process's
    own cgroups, named for `reap_boxes` to find; OSError (nothing left behind) if one cannot be."""
    name = cgroup_name(LIMITS_PREFIX, kind)
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
        for path in make_cgroups("probe", BwrapBackend()):
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

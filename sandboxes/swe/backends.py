"""Where a SWE episode's `bash` commands run, one fresh environment per episode.

Each command is its own process tree (no long-lived shell), so a timeout kills exactly that
command and nothing of it survives into the next step; the repository, the home directory and the
limits carry over between steps.

- bwrap: the terminal sandbox's bubblewrap isolation (`sandboxes.terminal.backends.BwrapInstance`:
  the sandbox's own root filesystem from `sandboxes.jail`, with the cgroup or rlimit limits, the
  unprivileged uid, an empty environment and the private /tmp, /run and home), one sandbox per
  command: the episode's copy of the repository is bound read-write at /repo (the only host
  path it sees besides the system directories) and the command replaces the interactive shell.
- docker: a container per episode from the terminal image, the repository bind-mounted at /repo;
  commands run with `docker exec` as the image's agent user, and whatever a command leaves running
  is killed when it ends. Docker carries stdout and stderr apart, so their interleaving is not exact.
- local: bash on the host in the workspace directory; no isolation, only when the user asks.
  Each command runs in the episode's `ProcessBox`, so what it leaves running (setsid, double
  forks) is killed when it ends or times out, and at close.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import time
import uuid

from sandboxes.base import SandboxCrashedError, SandboxError
from sandboxes.containment import ProcessBox
from sandboxes.jail import AGENT_UID, SANDBOX_PATH
from sandboxes.swe.config import REPO_IN_SANDBOX
from sandboxes.swe.process import Finished, run_bounded
from sandboxes.terminal.backends import SHELL_ENV, BwrapInstance
from sandboxes.terminal.config import Backend, BwrapBackend, DockerBackend
from sandboxes.terminal.reaper import OWNER_LABEL, owner, run_quietly

log = logging.getLogger(__name__)

HOME_IN_SANDBOX = "/home/agent"
DOCKER_TIMEOUT_S = 60.0
# What a docker step may take beyond its command's timeout (the exec round trip) before the client
# itself is killed.
DOCKER_GRACE_S = 10.0
KILLED = 128 + 9


def _python_alias(home: str, uid_gid: tuple[int, int] | None) -> str:
    """A ~/.local/bin with `python` for python3 (Debian has no `python`); its path on the host."""
    bin_dir = os.path.join(home, ".local", "bin")
    os.makedirs(bin_dir)
    python3 = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"
    os.symlink(python3, os.path.join(bin_dir, "python"))
    if uid_gid is not None:
        for path in (os.path.dirname(bin_dir), bin_dir):
            os.chown(path, *uid_gid)
        os.lchown(os.path.join(bin_dir, "python"), *uid_gid)
    return bin_dir


class Runner:
    """One episode's environment. `where` is the repository's path as the agent sees it; `owner`
    is who must own the workspace's files (None: whoever we are)."""

    kind = ""
    image = ""
    where = REPO_IN_SANDBOX
    owner: tuple[int, int] | None = None

    def __init__(self, tmpdir: str, workspace: str) -> None:
        self.tmpdir = tmpdir
        self.workspace = workspace

    def prepare(self) -> None:
        """Called once the workspace is filled: set up what needs it."""

    def run(self, command: str, timeout_s: float, limit: int) -> Finished:
        raise NotImplementedError

    def crash_reason(self) -> str | None:
        if not os.path.isdir(self.workspace):
            return f"the workspace {self.workspace} vanished"
        return None

    def resources(self) -> list[str]:
        return [f"path:{self.tmpdir}"]

    def destroy(self) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)


class _BwrapShell(BwrapInstance):
    """The terminal's bwrap instance, running one command over the repository instead of a shell."""

    def command_argv(self, workspace: str, path_prefix: str, command: str, info_fd: int) -> list[str]:
        # The first shell says on the info pipe that the sandbox is up, then becomes the command.
        started = f'printf up >&{info_fd}; exec {info_fd}>&-; exec bash -c "$1"'
        return self.sandbox_argv(
            ["bash", "-c", started, "bash", command],
            binds=("--bind", workspace, REPO_IN_SANDBOX),
            chdir=REPO_IN_SANDBOX,
            path=f"{path_prefix}:{SANDBOX_PATH}",
        )


class BwrapRunner(Runner):
    kind = "bwrap"

    def __init__(self, cfg: BwrapBackend, tmpdir: str, workspace: str) -> None:
        super().__init__(tmpdir, workspace)
        rc_path = os.path.join(tmpdir, "bashrc")  # the terminal argv binds one; bash -c never reads it
        with open(rc_path, "w"):
            pass
        self.shell = _BwrapShell(cfg, tmpdir, rc_path)
        self.owner = (self.shell.host_uid, self.shell.host_uid) if os.geteuid() == 0 else None
        _python_alias(self.shell.home, self.owner)
        self.path_prefix = f"{HOME_IN_SANDBOX}/.local/bin"

    def run(self, command: str, timeout_s: float, limit: int) -> Finished:
        info_pipe = os.pipe()
        try:
            argv = self.shell.command_argv(self.workspace, self.path_prefix, command, info_pipe[1])
        except BaseException:
            os.close(info_pipe[0])
            os.close(info_pipe[1])
            raise
        finished = run_bounded(argv, timeout_s=timeout_s, limit=limit, cwd=self.tmpdir, info_pipe=info_pipe)
        if not finished.timed_out and not finished.info:
            # Nothing came on the info pipe: bwrap never set the sandbox up, the command never ran.
            why = (finished.head + finished.tail).decode("utf-8", "replace").strip()
            raise SandboxCrashedError(f"bwrap could not start the command: {why or 'no message'}")
        return finished

    def resources(self) -> list[str]:
        return list(dict.fromkeys([*super().resources(), *self.shell.resources()]))

    def destroy(self) -> None:
        self.shell.destroy()
        super().destroy()


class LocalRunner(Runner):
    kind = "local"

    def __init__(self, tmpdir: str, workspace: str) -> None:
        super().__init__(tmpdir, workspace)
        self.home = os.path.join(tmpdir, "home")
        os.mkdir(self.home)
        bin_dir = _python_alias(self.home, None)
        self.where = workspace
        self.env = {"HOME": self.home, "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", **SHELL_ENV}
        self.box = ProcessBox()

    def run(self, command: str, timeout_s: float, limit: int) -> Finished:
        return run_bounded(
            self.box.wrap(["bash", "-c", command]),
            timeout_s=timeout_s,
            limit=limit,
            cwd=self.workspace,
            env=self.env,
            stop=self.box.kill,
        )

    def resources(self) -> list[str]:
        return [*super().resources(), *self.box.resources()]

    def destroy(self) -> None:
        self.box.close()
        super().destroy()


class DockerRunner(Runner):
    kind = "docker"

    def __init__(self, cfg: DockerBackend, tmpdir: str, workspace: str) -> None:
        super().__init__(tmpdir, workspace)
        self.cfg = cfg
        self.image = cfg.image
        self.owner = (AGENT_UID, AGENT_UID) if os.geteuid() == 0 else None
        self.container_id = ""
        self.box = ProcessBox()  # removes the container if the collector dies before destroy()

    def prepare(self) -> None:
        name = f"agentworld-swe-{uuid.uuid4().hex[:12]}"
        cfg = self.cfg
        argv = ["docker", "run", "-d", "--name", name, "--hostname", "sandbox", "--init"]
        # The terminal's label: its reaper (collectors call it at start) then removes the containers
        # of a collector that died without closing its sandboxes.
        argv += ["--label", "agentworld.sandbox=terminal", "--label", f"{OWNER_LABEL}={owner()}"]
        argv += ["--cpus", str(cfg.cpus), "--memory", cfg.memory, "--memory-swap", cfg.memory]
        argv += ["--pids-limit", str(cfg.pids_limit), "--cap-drop", "ALL"]
        argv += ["--security-opt", "no-new-privileges", "-v", f"{self.workspace}:{REPO_IN_SANDBOX}"]
        # The container's own process runs as (capability-less) root, out of reach of the agent
        # user's `kill -1` that ends each command.
        argv += ["-w", REPO_IN_SANDBOX, "-u", "0"]
        if not cfg.network:
            argv += ["--network", "none"]
        self.box.hold_container(name)
        try:
            started = run_quietly(
                self.box.wrap([*argv, cfg.image, "sleep", "infinity"]), timeout=DOCKER_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            with contextlib.suppress(subprocess.TimeoutExpired):
                run_quietly(["docker", "rm", "-f", name], timeout=DOCKER_TIMEOUT_S)
            raise SandboxError(
                f"docker run {cfg.image} did not finish within {DOCKER_TIMEOUT_S:g} s"
            ) from None
        if started.returncode != 0:
            raise SandboxError(
                f"docker run {cfg.image} failed (build the image with: bash infra/terminal-image/build.sh): "
                + started.stderr.strip()
            )
        self.container_id = started.stdout.strip()

    def run(self, command: str, timeout_s: float, limit: int) -> Finished:
        env = [a for k, v in SHELL_ENV.items() for a in ("-e", f"{k}={v}")]
        # Killing the docker client would not stop what it started in the container, and with every
        # capability dropped no other user there may kill it: coreutils `timeout` runs the command
        # in its own process group and kills that whole group (itself included) when time is up.
        # Then the agent user's other processes (what the command left running) are killed, as
        # under bwrap, where a command's PID namespace ends with it.
        # The wrapper's own stderr is closed so that bash's "Killed" notice stays out of the output.
        wrapper = (
            f'exec 3>&2 2>/dev/null; timeout -s KILL {timeout_s:g} bash -c "$1" 2>&3 3>&-; status=$?; '
            "kill -KILL -1; exit $status"
        )
        exec_as_agent = ["docker", "exec", "-u", str(AGENT_UID), *env, self.container_id]
        argv = [*exec_as_agent, "bash", "-c", wrapper, "bash", command]
        started = time.monotonic()
        finished = run_bounded(argv, timeout_s=timeout_s + DOCKER_GRACE_S, limit=limit)
        if finished.exit_status == KILLED and time.monotonic() - started >= timeout_s:
            finished.exit_status, finished.timed_out = None, True
        elif finished.exit_status != 0:
            reason = self.crash_reason()
            if reason:
                raise SandboxCrashedError(reason)
        return finished

    def crash_reason(self) -> str | None:
        reason = super().crash_reason()
        if reason or not self.container_id:
            return reason
        try:
            state = run_quietly(
                ["docker", "inspect", "-f", "{{.State.Status}}", self.container_id], timeout=DOCKER_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return f"docker did not answer within {DOCKER_TIMEOUT_S:g} s"
        if state.returncode != 0:
            return "the container is gone"
        status = state.stdout.strip()
        return None if status == "running" else f"the container is {status}"

    def resources(self) -> list[str]:
        found = [*super().resources(), *self.box.resources()]
        return [*found, f"container:{self.container_id}"] if self.container_id else found

    def destroy(self) -> None:
        if self.container_id:
            try:
                run_quietly(["docker", "rm", "-f", "-v", self.container_id], timeout=DOCKER_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning("docker rm %s did not finish; the reaper removes it later", self.container_id)
        self.box.close()
        super().destroy()


def make_runner(cfg: Backend, tmpdir: str, workspace: str) -> Runner:
    if isinstance(cfg, BwrapBackend):
        return BwrapRunner(cfg, tmpdir, workspace)
    if isinstance(cfg, DockerBackend):
        return DockerRunner(cfg, tmpdir, workspace)
    return LocalRunner(tmpdir, workspace)

"""Hold every process a sandbox starts, so that all of them can be killed at once.

A `ProcessBox` is a cgroup of its own on the host's cgroup v2 hierarchy where we may make one:
whatever a wrapped command starts (setsid, double-forked daemons included) stays in it, and
writing 1 to its `cgroup.kill` ends them all. A small watchdog (`sh`, outside the box) holds the
read end of a pipe whose write end only the collector holds: when the collector dies, even by
SIGKILL, the pipe closes and the watchdog kills the box, and removes the containers the box was
told of (a container's processes belong to the docker engine, not to us). `reap_orphans()`
removes the boxes of dead collectors whose watchdog died too; the first box a process makes
calls it.

Where no cgroup can be made (not root, no cgroup v2), each wrapped command runs under a launcher
that makes itself a child subreaper, so that orphans below it come back to it instead of PID 1,
and asks for a parent-death signal. When its command ends, when the box is killed, or when the
thread that spawned it dies (the collector killed), it kills every process left below it. The
signal follows the spawning thread, not the process: spawn from a thread that outlives the
command (a collector's worker, a sandbox's own loop or pool thread), never from a short-lived one.
The collector itself is never put in a box, so a kill never reaches it.

Every cgroup a sandbox makes (a box here, the limit cgroups of a bwrap sandbox) is made below the
collector's own cgroup (`own_cgroups`, read from /proc/self/cgroup: each v1 controller's path, and
the unified path), never at a hierarchy's root: the limits that hold the collector hold its
sandboxes too. Their names carry the owner's pid (`BOX_PREFIX`, `LIMITS_PREFIX`), which is how
`reap_boxes` finds those of a dead collector: below this process's own cgroups (where a collector
started from the same service, shell or CI job put them) and, for cgroups made before they were
nested, at each hierarchy's root.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

from sandboxes.checks import proc_files, process_exists

log = logging.getLogger(__name__)

BOX_PREFIX = "agentworld-box-"
# The limit cgroups of bwrap sandboxes: `agentworld-limits-<owner pid>-<kind>-<random>`.
LIMITS_PREFIX = "agentworld-limits-"
# A sandbox's private temp dir, `agentworld-<kind>-<owner pid>-<mkdtemp's suffix>`: the owner pid
# lets the next run remove what a collector killed before its close left behind.
_TMPDIR_NAME = re.compile(r"^agentworld-[a-z]+(?:-[a-z]+)*-(\d+)-[a-z0-9_]+$")
KILL_WAIT_S = 2.0
_POLL_S = 0.005
# Joins each cgroup.procs file given (N of them), then becomes the command: everything it starts
# is born inside. Arguments: N PROCS... ARGV...
JOIN_CGROUPS = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; n=$((n-1)); done; exec "$@"'
)
# Reads container names from stdin until EOF (the collector's end of the pipe closes when it exits,
# however it dies), then kills the box (a `docker run` in flight too), removes those containers
# and the box's directory. The second removal catches a container whose creation the engine was
# finishing at the first. Argument: the cgroup directory. A box closed normally kills its
# watchdog instead.
WATCHDOG = (
    'while read -r id; do ids="$ids $id"; done; echo 1 > "$1/cgroup.kill"; '
    '[ -z "$ids" ] || { docker rm -f -v $ids; sleep 2; docker rm -f -v $ids; } >/dev/null 2>&1; '
    'i=0; while [ -d "$1" ] && ! rmdir "$1" && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done'
)
# The fallback launcher (python -I -S -c). Arguments: TOKEN PARENT_PID ARGV... TOKEN only marks
# the process (its command line) as belonging to the box.
LAUNCHER = r"""
import ctypes, os, signal, sys
class Stop(Exception):
    pass
def stop(*_):
    raise Stop
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, stop)
def children():
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except (OSError, ValueError):
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) == os.getpid():
            found.append(int(name))
    return found
status = 137
try:
    if os.getppid() != int(sys.argv[2]):
        raise Stop
    pid = os.fork()
    if pid == 0:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_DFL)
        try:
            os.execvp(sys.argv[3], sys.argv[3:])
        except OSError as exc:
            print(f"{sys.argv[3]}: {exc.strerror}", file=sys.stderr)
            os._exit(127)
    while True:
        got, raw = os.wait()
        if got == pid:
            code = os.waitstatus_to_exitcode(raw)
            status = 128 - code if code < 0 else code
            break
except (Stop, ChildProcessError):
    pass
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
while kids := children():
    for kid in kids:
        try:
            os.kill(kid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for kid in kids:
        try:
            os.waitpid(kid, 0)
        except ChildProcessError:
            pass
os._exit(status)
"""


@functools.cache
def cgroup2_root() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `.../unified` on hybrid hosts)."""
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return fields[1]
    except OSError:
        pass
    return None


def _unescape(field: str) -> str:
    """A mountinfo path field: spaces, tabs, newlines and backslashes come octal-escaped."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


@functools.cache
def own_cgroups() -> dict[str, str]:
    """This process's own cgroup directory in each mounted hierarchy: by v1 controller name
    ("memory", "pids", "cpu"...), and "" for the unified (v2) hierarchy."""
    mounts: list[tuple[str, str, str, set[str]]] = []  # (fs type, root, mount point, options)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                sep = fields.index("-")
                fstype = fields[sep + 1]
                if fstype in ("cgroup", "cgroup2"):
                    options = set(fields[sep + 3].split(","))
                    mounts.append((fstype, _unescape(fields[3]), _unescape(fields[4]), options))
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except (OSError, ValueError):
        return {}
    found: dict[str, str] = {}
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        names = [n for n in controllers.split(",") if n] if hierarchy != "0" else [""]
        for fstype, root, point, options in mounts:
            if (names == [""]) != (fstype == "cgroup2") or not set(names) <= options | {""}:
                continue
            # Under a cgroup namespace or a bind of a subtree, the mount's root is a prefix of ours.
            inside = path
            if root != "/" and (path == root or path.startswith(root + "/")):
                inside = path[len(root) :]
            directory = os.path.normpath(point + "/" + inside.lstrip("/"))
            if os.path.isdir(directory):
                for name in names:
                    found.setdefault(name, directory)
                break
    return found


def cgroup_name(prefix: str, kind: str = "") -> str:
    """A new cgroup name carrying this process's pid, for `reap_boxes` to know its owner by."""
    middle = f"{kind}-" if kind else ""
    return f"{prefix}{os.getpid()}-{middle}{uuid.uuid4().hex[:12]}"


@functools.cache
def cgroups_unusable() -> str | None:
    """None if boxes can be cgroups here, else why not (made once: a real join is tried)."""
    if cgroup2_root() is None:
        return "no cgroup v2 hierarchy is mounted"
    parent = own_cgroups().get("")
    if parent is None:
        return "this process's own cgroup v2 directory is not mounted here"
    probe = os.path.join(parent, cgroup_name(BOX_PREFIX, "probe"))
    try:
        os.mkdir(probe)
    except OSError as exc:
        return f"cannot make a cgroup under {parent} (this process's own cgroup): {exc.strerror}"
    try:
        if not os.path.exists(os.path.join(probe, "cgroup.kill")):
            return "the kernel has no cgroup.kill (Linux 5.14 or later needed)"
        joined = subprocess.run(
            join_cgroups_argv([os.path.join(probe, "cgroup.procs")], ["true"]),
            capture_output=True,
            text=True,
        )
        if joined.returncode != 0:
            return f"cannot move a process into a cgroup: {joined.stderr.strip()}"
    finally:
        remove_cgroup(probe)
    return None


def join_cgroups_argv(procs: list[str], argv: list[str]) -> list[str]:
    """`argv`, run after joining the cgroups whose `cgroup.procs` files are given."""
    return ["sh", "-c", JOIN_CGROUPS, "sh", str(len(procs)), *procs, *argv]


def remove_cgroup(path: str) -> None:
    """Remove an empty cgroup once its killed processes are gone."""
    # The kernel refuses rmdir while the killed processes are still exiting: retry for a while.
    deadline = time.monotonic() + KILL_WAIT_S
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


def kill_cgroup(path: str) -> None:
    """Kill every process in a cgroup (and its children) and wait until none is left. cgroup v2
    has cgroup.kill; a v1 cgroup gets each listed process killed until none is left."""
    if not os.path.exists(os.path.join(path, "cgroup.kill")):
        _kill_listed(path)
        return
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
    except FileNotFoundError:
        return
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline:
        try:
            with open(os.path.join(path, "cgroup.events")) as f:
                if "populated 0" in f.read():
                    return
        except FileNotFoundError:
            return
        time.sleep(_POLL_S)
    log.warning("processes of cgroup %s still exiting after %g s", path, KILL_WAIT_S)


def _kill_listed(path: str) -> None:
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline:
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(_POLL_S)
    log.warning("processes of cgroup %s still exiting after %g s", path, KILL_WAIT_S)


class ProcessBox:
    """The processes of one sandbox. `wrap` an argv to start it inside; `kill` ends everything
    inside (the box stays usable); `close` kills and removes the box. `use_cgroup=False` forces
    the subreaper launcher even where a cgroup could be made."""

    def __init__(self, use_cgroup: bool = True) -> None:
        self.token = cgroup_name(BOX_PREFIX)
        self.cgroup: str | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._lifeline = -1
        if not use_cgroup or cgroups_unusable() is not None:
            return
        _reap_orphans_once()
        path = os.path.join(own_cgroups()[""], self.token)
        os.mkdir(path)
        self.cgroup = path
        read_end, self._lifeline = os.pipe()
        try:
            self._watchdog = subprocess.Popen(
                ["sh", "-c", WATCHDOG, "sh", path],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the collector's group must not stop it
            )
        except BaseException:
            self.close()
            raise
        finally:
            os.close(read_end)

    def wrap(self, argv: list[str]) -> list[str]:
        """The argv that runs `argv` inside the box."""
        if self.cgroup is not None:
            return join_cgroups_argv([os.path.join(self.cgroup, "cgroup.procs")], argv)
        return [sys.executable, "-I", "-S", "-c", LAUNCHER, self.token, str(os.getpid()), *argv]

    def kill(self) -> None:
        """Kill every process started inside the box, and wait (bounded) until they are gone."""
        if self.cgroup is not None:
            kill_cgroup(self.cgroup)
            return
        launchers = _processes_marked(self.token)
        for pid in launchers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)  # each launcher kills what is below it, then exits
        deadline = time.monotonic() + KILL_WAIT_S
        while (left := [pid for pid in launchers if process_exists(pid)]) and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def hold_container(self, name: str) -> None:
        """Remove the container `name` too if the collector dies before it closes the box (the
        caller removes it at close). Given before `docker run` (wrapped) starts, so a container
        being made when the collector dies is covered. Without a cgroup there is no watchdog:
        the next run's reaper removes the container."""
        if self._lifeline >= 0:
            os.write(self._lifeline, f"{name}\n".encode())

    def resources(self) -> list[str]:
        return [f"path:{self.cgroup}"] if self.cgroup else []

    def close(self) -> None:
        self.kill()
        if self.cgroup is not None:
            remove_cgroup(self.cgroup)
        if self._watchdog is not None:
            self._watchdog.kill()  # its work is done; the containers are the caller's to remove
            self._watchdog.wait()
            self._watchdog = None
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1


def _processes_marked(token: str) -> list[int]:
    """Pids whose command line has `token` as an argument (the fallback launchers of a box)."""
    wanted = token.encode()
    return [pid for pid, (cmdline,) in proc_files("cmdline") if wanted in cmdline.split(b"\0")]


def owner_of(name: str, prefix: str) -> int | None:
    """The owner pid that a name made as `<prefix><pid>-<suffix>` carries, or None."""
    if not name.startswith(prefix):
        return None
    pid = name[len(prefix) :].split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


@functools.cache
def _reap_orphans_once() -> None:
    removed = reap_orphans()
    if removed:
        log.warning("killed the processes of %d sandboxes whose collector had died", removed)


def reap_orphans() -> int:
    """Kill and remove the boxes of collectors that are gone (their watchdogs too); how many."""
    return reap_boxes(lambda pid: not process_exists(pid))


def _cgroup_parents() -> list[str]:
    """Where sandbox cgroups are made: this process's own cgroups, then (made there before they
    were nested) each hierarchy's root."""
    roots = [point for name, point in _hierarchy_roots().items() if name in own_cgroups()]
    return list(dict.fromkeys([*own_cgroups().values(), *roots]))


def _hierarchy_roots() -> dict[str, str]:
    """Each hierarchy's mount point, by the same keys as `own_cgroups`."""
    roots: dict[str, str] = {}
    for name, directory in own_cgroups().items():
        point = directory
        while os.path.exists(os.path.join(os.path.dirname(point), "cgroup.procs")) and point != "/":
            point = os.path.dirname(point)
        roots[name] = point
    return roots


def reap_boxes(select: Callable[[int], bool]) -> int:
    """Kill and remove the sandbox cgroups (process boxes, bwrap limit cgroups) whose owner pid
    passes `select`; how many sandboxes they were."""
    reaped: set[str] = set()
    for parent in _cgroup_parents():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            pid = owner_of(name, BOX_PREFIX) or owner_of(name, LIMITS_PREFIX)
            if pid is None or not select(pid):
                continue
            path = os.path.join(parent, name)
            kill_cgroup(path)
            remove_cgroup(path)
            reaped.add(name)
    return len(reaped)


def sandbox_tmpdir(kind: str) -> str:
    """A new private temp dir for one sandbox of `kind` ("terminal", "mcp", ...), named with this
    process's pid so that `reap_tmpdirs` can tell when its owner is gone."""
    return tempfile.mkdtemp(prefix=f"agentworld-{kind}-{os.getpid()}-")


def reap_tmpdirs(root: str | None = None) -> int:
    """Remove the sandbox temp dirs (under `root`, the system temp dir by default) whose owner
    process no longer exists; how many."""
    root = root or tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    removed = 0
    for name in names:
        match = _TMPDIR_NAME.match(name)
        if match is None or process_exists(int(match.group(1))):
            continue
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        removed += 1
    return removed

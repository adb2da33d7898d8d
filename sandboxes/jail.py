"""The root filesystem and the launch of every bubblewrap sandbox (terminal, SWE, MCP, desktop).

A sandbox never sees the host's `/`. Its root is an empty tmpfs (bwrap's own) that gets:

- the system directories read-only (`/usr`, `/bin`, `/sbin`, `/lib*` as they exist, usrmerge
  symlinks kept as symlinks): the programs tasks use (bash, python3, nano, bc, file, git...) live
  there;
- an allow-listed part of `/etc` read-only (`ETC_SHOWN`): what programs read to run (the dynamic
  linker's cache, `alternatives`, certificates, terminfo, fonts, python3's own configuration...).
  Everything else stays out: /etc/environment, pip.conf, npmrc, gitconfig, wgetrc, docker/,
  ssh/, ssl/private, shadow, the host's machine-id, hostname and hosts. The sandbox gets its own
  passwd, group, hosts, hostname and a random machine-id instead;
- a private /dev, /proc, /tmp, /var/tmp and /run; the caller's own binds (a home, a repository);
  the host paths it was asked to show (`ro_paths`, read-only at their own path, e.g. a virtual
  environment that an MCP server lives in); then the root itself is made read-only.

So /opt, /srv, /mnt, /media, /work, /sys, the host's /var (only a private /var/tmp is there),
checkouts and data folders do not exist inside; /home holds only the sandbox's own home, and
/root is an empty directory closed to the agent (as on any system, `ls /root` is refused).

What the agent can see of processes is its pid namespace: bwrap's own pid-1 monitor and what it
starts. bwrap's `--clearenv` only clears the environment of the command it runs, not
of the monitor, so the whole chain (cgroup join, mounter, setpriv, bwrap) is started from
`env -i`: no process inside carries the recorder's environment (API keys, tokens) in
`/proc/*/environ`, whatever environment the caller (a tmux server, a collector) has.

As root, bwrap runs as `nobody` (`BWRAP_HOST_UID`) in an unprivileged user namespace: it cannot
read root's files or reach root-only sockets. `ro_paths` that nobody could not reach (under
root's 0700 home, or a 0700 temp dir) are first bound, as root in a private mount namespace, onto
mount points in the sandbox's own directory, which bwrap then binds at their own path.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

AGENT_UID = 1000
# The uid bwrap runs as when we are root: an unprivileged user namespace owned by `nobody`
# cannot read root's files or reach root-only sockets (docker.sock) on the host.
BWRAP_HOST_UID = 65534
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc entries shown read-only (fnmatch patterns, relative to /etc). Configuration of programs
# only: nothing that names the host, its users, its network or credentials.
ETC_SHOWN = (
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "protocols",
    "services",
    "ethertypes",
    "localtime",
    "timezone",
    "locale.alias",
    "locale.conf",
    "os-release",
    "debian_version",
    "lsb-release",
    "shells",
    "inputrc",
    "terminfo",
    "magic",
    "magic.mime",
    "mime.types",
    "mailcap",
    "mailcap.order",
    "manpath.config",
    "nanorc",
    "vim",
    "emacs",
    "perl",
    "python3",
    "python3.*",
    "java-*",
    "groff",
    "papersize",
    "libpaper.d",
    "dictionaries-common",
    "ghostscript",
    "ImageMagick-*",
    "xml",
    "sgml",
    "mtab",
    # A desktop's X server, window manager, toolkits and session bus read these.
    "X11",
    "xdg",
    "fonts",
    "dbus-1",
    "gtk-2.0",
    "gtk-3.0",
    "glvnd",
    "dconf",
)
# The /etc files every sandbox has its own of (`_own_etc`).
OWN_ETC = ("passwd", "group", "hostname", "hosts", "machine-id")
# Where the sandbox's own programs are found.
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# The only variable of the launch chain's environment: where env finds sh, setpriv and bwrap.
LAUNCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# As root, in a private mount namespace (`unshare --mount`): bind each host path onto its mount
# point in the sandbox's directory, where nobody can reach it. Arguments: N (SRC DST)... ARGV...
MOUNTER = """
n=$1; shift; while [ "$n" -gt 0 ]; do mount --bind "$1" "$2" || exit 126; shift 2; n=$((n-1)); done
exec "$@"
"""
# Joins each cgroup.procs file given (N of them), writes its pid (which exec keeps: the pid of
# bwrap) to PIDFILE unless it is "-", then becomes the rest. Arguments: PIDFILE N PROCS... ARGV...
STARTER = """
[ "$1" = - ] || echo $$ > "$1"; shift
n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; n=$((n-1)); done
exec "$@"
"""


def shown(path: str | Path) -> bool:
    """Whether a host path exists inside every sandbox as it is (under a system directory)."""
    return any(_under(os.path.abspath(path), top) for top in SYSTEM_DIRS)


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


@functools.cache
def system_argv() -> tuple[str, ...]:
    """bwrap arguments that show the system directories and the allowed /etc, read-only."""
    argv: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--perms", "0755", "--dir", "/etc"]  # bwrap would make it 0700 otherwise
    try:
        top = sorted(os.listdir("/etc"))
    except OSError:
        top = []
    wanted = [p for p in ETC_SHOWN if "/" not in p]
    for name in top:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in wanted):
            argv += _etc_entry(name)
    for nested in (p for p in ETC_SHOWN if "/" in p):
        if os.path.lexists(os.path.join("/etc", nested)):
            argv += _etc_entry(nested)
    return tuple(argv)


def _etc_entry(name: str) -> list[str]:
    path = os.path.join("/etc", name)
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind", path, path]


def _own_etc(hostname: str) -> dict[str, str]:
    """The sandbox's own identity files: its users, its name, a machine-id of its own."""
    uid = AGENT_UID
    return {
        "passwd": (
            "root:x:0:0:root:/root:/usr/sbin/nologin\n"
            f"agent:x:{uid}:{uid}:agent:/home/agent:/bin/bash\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
        "group": f"root:x:0:\nagent:x:{uid}:\nnogroup:x:65534:\n",
        "hostname": f"{hostname}\n",
        "hosts": f"127.0.0.1\tlocalhost\n127.0.1.1\t{hostname}\n::1\tlocalhost ip6-localhost\n",
        "machine-id": f"{uuid.uuid4().hex}\n",
    }


class Jail:
    """The root filesystem of one sandbox and how its bwrap is launched.

    `directory` is the sandbox's private host directory (reachable by the sandbox's user): its
    own /etc files and the mount points of `ro_paths` go there. `network`: the sandbox shares the
    host's network, so it sees the host's resolv.conf too."""

    def __init__(
        self,
        directory: str,
        hostname: str = "sandbox",
        ro_paths: Sequence[str | Path] = (),
        network: bool = False,
    ) -> None:
        self.directory = directory
        self.network = network
        self.as_root = os.geteuid() == 0
        self.host_uid = BWRAP_HOST_UID if self.as_root else os.geteuid()
        self.etc = os.path.join(directory, "etc")
        os.makedirs(self.etc, mode=0o755, exist_ok=True)
        for name, content in _own_etc(hostname).items():
            with open(os.path.join(self.etc, name), "w") as f:
                f.write(content)
            os.chmod(os.path.join(self.etc, name), 0o644)
        # root's home, there but closed to the agent (0700, owned by an unmapped uid), as on any
        # system: `ls /root` says "Permission denied". Made when we are root (else the agent
        # would own it).
        self.closed_root = os.path.join(directory, "root")
        os.makedirs(self.closed_root, mode=0o700, exist_ok=True)
        # (host path, what bwrap binds: the path itself, or its mount point when we are root)
        self.ro_paths: list[tuple[str, str]] = []
        wanted = [p for p in dict.fromkeys(os.path.abspath(p) for p in ro_paths) if not shown(p)]
        for index, raw in enumerate(wanted):
            source = raw
            if self.as_root:
                source = os.path.join(directory, "binds", str(index))
                os.makedirs(os.path.dirname(source), mode=0o755, exist_ok=True)
                if os.path.isdir(raw):
                    os.makedirs(source, exist_ok=True)
                else:  # a file is bound onto a file
                    Path(source).touch()
            self.ro_paths.append((raw, source))

    def mounts(self, *own: str) -> list[str]:
        """bwrap's mount arguments: the system, private /dev /proc /tmp /run, then `own` (the
        caller's binds), the `ro_paths`, and last the root made read-only."""
        argv = [*system_argv()]
        for name in OWN_ETC:
            argv += ["--ro-bind", os.path.join(self.etc, name), f"/etc/{name}"]
        if self.network and os.path.exists("/etc/resolv.conf"):
            argv += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
        argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
        argv += ["--tmpfs", "/var/tmp", "--dir", "/home"]
        if self.as_root and not any(_under(path, "/root") for path, _ in self.ro_paths):
            argv += ["--ro-bind", self.closed_root, "/root"]  # read-only: no mount point inside
        argv += own
        for path, source in self.ro_paths:
            argv += ["--ro-bind", source, path]
        return [*argv, "--remount-ro", "/"]

    def launch(self, bwrap: list[str], cgroups: Sequence[str] = (), pidfile: str | None = None) -> list[str]:
        """The full argv that starts `bwrap` (an argv starting with "bwrap"): from an empty
        environment, as `nobody` when we are root, with `ro_paths` mounted for it to bind, after
        joining `cgroups` (directories) and writing its pid to `pidfile`."""
        argv = list(bwrap)
        if self.as_root:
            uid = str(self.host_uid)
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
            staged = [arg for path, source in self.ro_paths for arg in (path, source)]
            if staged:
                mounter = ["sh", "-c", MOUNTER, "sh", str(len(staged) // 2), *staged]
                argv = ["unshare", "--mount", "--propagation", "private", *mounter, *argv]
        if cgroups or pidfile:
            procs = [os.path.join(c, "cgroup.procs") for c in cgroups]
            argv = ["sh", "-c", STARTER, "sh", pidfile or "-", str(len(procs)), *procs, *argv]
        return clean_env(argv)


def clean_env(argv: list[str]) -> list[str]:
    """`argv` started with an empty environment (but for a PATH to find its programs on)."""
    return ["env", "-i", f"PATH={LAUNCH_PATH}", *argv]

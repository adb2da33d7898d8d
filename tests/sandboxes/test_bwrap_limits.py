"""bwrap sandboxes are bounded either way: by a cgroup, or by per-process rlimits without one.

The hogs are bounded themselves (a fixed number of forks, a fixed allocation, a short busy loop),
so a missing limit fails the test instead of hurting the host.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.checks import resource_exists
from sandboxes.containment import BOX_PREFIX
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from schemas.records import Task

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]

ROOT = Path(__file__).resolve().parents[2]

FORKS = """import os, time
n = 0
try:
    for _ in range(100):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as exc:
    print("fork refused:", exc.strerror)
print("forked", n)
"""
# Spins until it has used argv[1] seconds of CPU time (at most 20 s of wall time): on a busy host a
# fixed wall-clock loop could get too little CPU to reach a limit.
BUSY = """import os, sys, time
start = time.monotonic()
while os.times().user < float(sys.argv[1]) and time.monotonic() - start < 20:
    pass
print("cpu time %.2f" % os.times().user)
"""
HOG = "python3 -c 'x = bytearray(400 << 20); print(\"allocated\")'"


def _script(name: str, source: str) -> str:
    """A setup command writing `source` to ~/name (commands are one line each)."""
    return f"printf '%s\\n' {' '.join(shlex.quote(line) for line in source.splitlines())} > {name}"


@pytest.fixture(params=["cgroup", "rlimit"])
def limited(request: pytest.FixtureRequest) -> Iterator[TerminalSandbox]:
    for tool in ("bwrap", "tmux"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (apt-get install {tool})")
    backend = make_backend(
        "bwrap", memory="160m", pids_limit=24, cpus=0.25, cpu_seconds=1, limits=request.param
    )
    sandbox = TerminalSandbox(TerminalConfig(backend=backend, command_timeout=20))
    sandbox.start()
    sandbox.reset(Task(id="limits", setup=[_script("forks.py", FORKS), _script("busy.py", BUSY)]))
    held = sandbox.resources()
    yield sandbox
    sandbox.close()
    assert not [r for r in held if resource_exists(r)]


def _stat(path: str) -> dict[str, str]:
    with open(path) as f:
        return dict(line.split()[:2] for line in f.read().splitlines())


def run(sandbox: TerminalSandbox, command: str) -> tuple[str, int | None]:
    obs = sandbox.step(command_action(command)).observation
    return obs.text, obs.data["exit_code"]


def test_processes_are_capped(limited: TerminalSandbox) -> None:
    text, _ = run(limited, "python3 forks.py")
    forked = re.search(r"^forked (\d+)$", text, re.M)
    assert forked and "fork refused: Resource temporarily unavailable" in text, text
    assert int(forked[1]) < 24, text
    assert run(limited, "echo alive")[0].splitlines()[-2] == "alive"


def test_memory_is_capped(limited: TerminalSandbox) -> None:
    text, code = run(limited, HOG)
    assert code != 0 and not re.search(r"^allocated$", text, re.M), text
    assert run(limited, "echo alive")[1] == 0


def test_cpu_is_capped(limited: TerminalSandbox) -> None:
    if limited.describe().config["limits"] == "cgroup":
        # 0.25 CPUs: the kernel throttled the loop (on a busy host its share alone would prove
        # nothing).
        text, code = run(limited, "python3 busy.py 0.5")
        # resources() lists the booted spare's cgroups too; that one ran nothing. The process boxes
        # (sandboxes.containment) only hold processes: they have no CPU limit.
        groups = [
            r[5:] for r in limited.resources() if r.startswith("path:/sys/fs/cgroup/") and BOX_PREFIX not in r
        ]
        stats = [_stat(f"{g}/cpu.stat") for g in groups if os.path.exists(f"{g}/cpu.stat")]
        assert code == 0 and max(int(s["nr_throttled"]) for s in stats) > 0, (text, stats)
    else:
        # 1 s of CPU time per process, then the kernel kills it.
        text, code = run(limited, "python3 busy.py 2")
        assert code in (137, 152) and not re.search(r"^cpu time \d", text, re.M), text
    assert run(limited, "echo alive")[1] == 0


def test_describe_says_which_limits_hold(limited: TerminalSandbox) -> None:
    config = limited.describe().config
    assert config["limits"] in ("cgroup", "rlimit") and config["memory"] == "160m"
    assert (config["limits"] == "rlimit") == (config.get("cpu_seconds") == 1)


# Run on a host without cgroups: a private mount namespace where no cgroup hierarchy is mounted.
NO_CGROUPS = """
import logging, sys
from sandboxes.base import SandboxError
from sandboxes.terminal import backends, make_backend
logging.basicConfig(level=logging.WARNING, format="%(message)s")
print("auto:", backends.bwrap_limits(make_backend("bwrap")), flush=True)
try:
    backends.bwrap_limits(make_backend("bwrap", limits="cgroup"))
except SandboxError as exc:
    print("cgroup:", exc, flush=True)
"""


def test_without_cgroups_auto_falls_back_and_cgroup_refuses() -> None:
    hide = 'umount -R -l /sys/fs/cgroup && exec "$0" "$@"'
    argv = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        hide,
        sys.executable,
        "-c",
        NO_CGROUPS,
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "auto: rlimit" in done.stdout and "no cgroups here" in done.stderr, (done.stdout, done.stderr)
    assert re.search(r"cgroup: .*cgroup limits are not available here.*--limits rlimit", done.stdout), (
        done.stdout
    )


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="'auto', 'cgroup' or 'rlimit'"):
        make_backend("bwrap", limits="none")
    with pytest.raises(ValueError, match="pids_limit >= 1"):
        make_backend("bwrap", pids_limit=0)

"""bwrap sandboxes are bounded either way: by a cgroup, or by per-process rlimits without one.

The hogs are bounded themselves (a fixed number of forks, a fixed allocation, a short busy loop),
so a missing limit fails the test instead of hurting the host.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
from collections.abc import Iterator

import pytest

from sandboxes.base import SandboxError
from sandboxes.checks import resource_exists
from sandboxes.containment import BOX_PREFIX
from sandboxes.terminal import TerminalConfig, TerminalSandbox, backends, command_action, make_backend
from schemas.records import Task

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]

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


def test_without_cgroups_auto_falls_back_and_cgroup_refuses(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A host where cgroups cannot be made (no root, read-only /sys/fs/cgroup), simulated by a root
    # directory that does not exist.
    monkeypatch.setattr(backends, "_CGROUP_ROOT", "/nonexistent/cgroup")
    backends._cgroups_usable.cache_clear()
    backends._warn_rlimit_once.cache_clear()
    try:
        with caplog.at_level(logging.WARNING):
            assert backends.bwrap_limits(make_backend("bwrap")) == "rlimit"
        assert "no cgroups here" in caplog.text
        with pytest.raises(SandboxError, match="cgroup limits are not available here.*--limits rlimit"):
            backends.bwrap_limits(make_backend("bwrap", limits="cgroup"))
    finally:
        backends._cgroups_usable.cache_clear()


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="'auto', 'cgroup' or 'rlimit'"):
        make_backend("bwrap", limits="none")
    with pytest.raises(ValueError, match="pids_limit >= 1"):
        make_backend("bwrap", pids_limit=0)

"""SIGINT (to the whole process group, as a terminal's Ctrl-C sends it) and SIGTERM at many moments
of a real collector run, one run after another: while Python starts, while an image boots, while a
container is torn down, during a reset and during a step. Nothing of a run may survive it, episodes
in flight end as "aborted" (never as errors), the dataset stays readable, and a rerun finishes it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.collectors.conftest import (
    ROOT,
    assert_exactly_once,
    collector_argv,
    run_collector,
    trajectories,
    write_tasks,
)

SIGINT, SIGTERM = signal.SIGINT, signal.SIGTERM
# When to signal: seconds after the collector starts (its imports take about 1.5 s here, a sandbox
# boots in about 1 s), or (command, n, s): s seconds after the collector started its n-th child
# running `command` (a `docker run` here takes 0.8-2.4 s: its first tenths are the client starting,
# then the container is created and started).
Trigger = float | tuple[str, int, float]
DOCKER_PLAN: list[tuple[signal.Signals, Trigger]] = [
    (SIGINT, ("docker run", 0, 0.4)),  # the first image start
    (SIGINT, ("docker run", 3, 0.25)),  # a spare booting during an episode
    (SIGINT, ("docker rm", 0, 0.05)),  # a container being removed after its episode
    (SIGTERM, ("docker run", 2, 0.3)),
    (SIGINT, 0.3),
    (SIGTERM, 2.4),
    (SIGINT, 3.2),
    (SIGINT, 4.4),
]
BWRAP_PLAN: list[tuple[signal.Signals, Trigger]] = [
    (SIGINT, 0.3),
    (SIGINT, 1.6),
    (SIGTERM, 2.0),
    (SIGINT, 2.4),
    (SIGINT, 2.8),
    (SIGTERM, 3.3),
    (SIGINT, 3.9),
    (SIGINT, 4.6),
]
EPISODES = 12


def _tasks(path: Path) -> Path:
    """Quick episodes keep docker and tmux commands in flight all the time (a boot and a teardown
    per reset); slow ones stretch a reset and a step over the signal."""
    quick = {"id": "quick", "actions": [{"command": "true"}]}
    slow_reset = {"id": "slow-reset", "setup": ["sleep 0.6", "echo seeded > notes.txt", "sleep 0.6"]}
    slow_reset["actions"] = [{"command": "cat notes.txt"}]
    slow_steps = {"id": "slow-steps", "actions": [{"command": "sleep 0.4"}] * 3}
    return write_tasks(path, [quick, slow_reset, quick | {"id": "quick-2"}, slow_steps])


def _children(pid: int, command: str) -> set[int]:
    """Live child processes of `pid` whose argv starts with the words of `command`."""
    prefix = command.replace(" ", "\0").encode() + b"\0"
    found = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid and argv.startswith(prefix):
            found.add(int(entry.name))
    return found


def _wait_for(process: subprocess.Popen[str], trigger: Trigger) -> None:
    if isinstance(trigger, float):
        time.sleep(trigger)
        return
    command, n, after = trigger
    seen: set[int] = set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        running = _children(process.pid, command)
        seen |= running
        if running and len(seen) > n:
            time.sleep(after)
            return
        time.sleep(0.003)
    raise AssertionError(f"the collector never ran `{command}` {n + 1} times")


def _leftovers(pid: int) -> list[str]:
    """Containers, tmux sockets and tmux servers of the collector that had this pid."""
    found = []
    owner = f"agentworld.owner={socket.gethostname()}:{pid}"
    if subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
        listed = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label={owner}"], capture_output=True, text=True
        )
        found += [f"container {c}" for c in listed.stdout.split()]
    tmux_dir = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
    found += [f"tmux socket {p}" for p in tmux_dir.glob(f"agentworld-{pid}-*")]
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and f"agentworld-{pid}-".encode() in cmdline:
            words = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"process {proc.name}: {words[:120]}")
    return found


def _interrupt_repeatedly(
    tmp_path: Path, backend_args: list[str], plan: list[tuple[signal.Signals, Trigger]]
) -> None:
    out = tmp_path / "data"
    args = [*backend_args, "--tasks", str(_tasks(tmp_path / "tasks.jsonl")), "--policy", "scripted"]
    args += ["--sandboxes", "2", "--episodes", str(EPISODES), "--out", str(out)]
    for signum, trigger in plan:
        # Its own process group, so that the group-wide SIGINT below reaches the collector and its
        # children (as Ctrl-C in a terminal does) and nothing else.
        process = subprocess.Popen(
            collector_argv(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        _wait_for(process, trigger)
        if signum == SIGINT:
            os.killpg(process.pid, SIGINT)
        else:
            process.send_signal(SIGTERM)
        _, stderr = process.communicate(timeout=90)
        where = f"{signum.name} at {trigger} (exit {process.returncode})"
        # Before Python installs its handlers a signal kills it outright, and that is fine too.
        assert process.returncode in (0, 130, 143, -signum), f"{where}: {stderr[-3000:]}"
        if process.returncode in (130, 143):
            assert "Traceback" not in stderr, f"{where}: {stderr[-3000:]}"
        assert not _leftovers(process.pid), f"{where}: {_leftovers(process.pid)}"
        found = trajectories(out) if out.exists() else []
        slots = Counter(t.task.metadata["slot"] for t in found)
        assert all(count == 1 for count in slots.values()), f"{where}: duplicates {slots}"
        failed = [(t.task.id, t.outcome.error) for t in found if t.outcome.status == "error"]
        assert not failed, f"{where}: a signal turned episodes into errors: {failed}"
        aborted = [t for t in found if t.outcome.status == "aborted"]
        assert all(t.steps for t in aborted), f"{where}: an aborted episode without steps was kept"
    rerun = run_collector(*args, timeout=180)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert_exactly_once(out, EPISODES)


@pytest.mark.docker
@pytest.mark.tmux
def test_signals_at_any_moment_leave_no_container_or_tmux_server(tmp_path: Path, terminal_image: str) -> None:
    _interrupt_repeatedly(tmp_path, ["--backend", "docker", "--memory", "271m"], DOCKER_PLAN)


@pytest.mark.bwrap
@pytest.mark.tmux
def test_signals_at_any_moment_leave_no_bwrap_shell_or_tmux_server(tmp_path: Path, bwrap: None) -> None:
    _interrupt_repeatedly(tmp_path, ["--backend", "bwrap"], BWRAP_PLAN)

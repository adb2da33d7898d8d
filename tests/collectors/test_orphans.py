"""No process of a collector's sandboxes outlives the collector killed with SIGKILL mid-episode.

Each collector runs as a subprocess on the local backends (SWE, MCP) and the terminal's three
backends. Its tasks leave processes behind on purpose (a setsid'd one, a double-forked one, and
for MCP a server and children that ignore SIGTERM), each writing its pid to a file. Just before
the kill the test also takes every descendant of the collector from /proc and its tmux servers by
socket name; 10 s after the kill none of these pids may be alive, and no container of the
collector (found by its owner label) may be left.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandboxes.checks import process_exists
from sandboxes.terminal.reaper import OWNER_LABEL
from tests.collectors.conftest import ROOT, collector_argv, write_tasks

GONE_WITHIN_S = 10.0
HANG = "297.5"  # seconds: a command still running when the collector is killed, told apart by it
SERVER = Path(__file__).with_name("spawning_mcp_server.py")


def orphan_maker(pids: Path) -> str:
    """Shell that leaves a setsid'd process and a double-forked one behind; each writes its pid."""
    keep = f"echo $$ >> {pids}; exec sleep 300"
    return f"setsid sh -c '{keep}' & (sh -c '{keep}' &); "


def _processes() -> dict[int, tuple[int, list[str]]]:
    """pid -> (parent pid, argv) of every process."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        found[int(name)] = (int(stat[stat.rindex(")") + 2 :].split()[1]), argv)
    return found


def held_by(collector: int) -> set[int]:
    """The collector's descendants, and tmux processes named after it (a server leaves the tree)."""
    table = _processes()
    found, frontier = set(), {collector}
    while frontier:
        frontier = {pid for pid, (parent, _) in table.items() if parent in frontier} - found
        found |= frontier
    tmux = {
        pid
        for pid, (_, argv) in table.items()
        if argv[:2] and os.path.basename(argv[0]) == "tmux" and f"agentworld-{collector}-" in " ".join(argv)
    }
    return found | tmux


def pids_in(path: Path) -> set[int]:
    return {int(line) for line in path.read_text().split()} if path.exists() else set()


def wait_until(check: object, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def hanging() -> set[int]:
    """The commands the episodes are in when the collector is killed (in containers too)."""
    return {pid for pid, (_, argv) in _processes().items() if argv[:2] == ["sleep", HANG]}


def owned_containers(collector: int) -> list[str]:
    label = f"label={OWNER_LABEL}={socket.gethostname()}:{collector}"
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", label], capture_output=True, text=True)
    return listed.stdout.split()


def kill_and_check(collector: subprocess.Popen[str], marked: set[int], docker: bool = False) -> None:
    """SIGKILL the collector; every pid it held (and each `marked` one) must be gone 10 s later,
    and with `docker` its containers too."""
    held = held_by(collector.pid) | marked
    if docker:
        assert owned_containers(collector.pid), "the collector should hold containers now"
    collector.kill()
    collector.wait()
    deadline = time.monotonic() + GONE_WITHIN_S
    while (alive := {pid for pid in held if process_exists(pid)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    described = {pid: " ".join(_processes().get(pid, (0, ["?"]))[1]) for pid in alive}
    assert not alive, f"{len(alive)} of {len(held)} processes survived the collector: {described}"
    while docker and owned_containers(collector.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not docker or not owned_containers(collector.pid), "containers survived the collector"


def start(module: str, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", module, "--no-progress", *args]
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _git_repo(path: Path) -> Path:
    path.mkdir()
    (path / "README").write_text("orphans\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@example.com"]):
        if args[0] == "-c":
            args = [*args, "commit", "-qm", "first"]
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    return path


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_swe_collector_killed_leaves_no_process(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "docker":
        request.getfixturevalue("terminal_image")
    # A setsid'd sleep, a double-forked one and the command's own, per episode.
    command = f"setsid sleep {HANG} & (sleep {HANG} &); sleep {HANG}"
    step = {"kind": "bash", "arguments": {"command": command, "timeout_s": 600}}
    task = {"id": "orphans", "instruction": "Leave processes behind.", "actions": [step]}
    task["metadata"] = {"template": str(_git_repo(tmp_path / "repo")), "test_command": ["true"]}
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task | {"id": f"orphans-{n}"} for n in range(2)])
    collector = start(
        "collectors.swe", "--backend", backend, "--policy", "scripted", "--tasks", str(tasks),
        "--sandboxes", "2", "--episodes", "2", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    wait_until(lambda: len(hanging()) >= 6 or collector.poll() is not None, "both episodes' commands")
    assert collector.poll() is None, collector.stderr.read() if collector.stderr else ""
    kill_and_check(collector, hanging(), docker=backend == "docker")


def test_mcp_local_collector_killed_leaves_no_process(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # -I: the script's directory (next to tests/collectors/mcp/) must not shadow the mcp package.
    entry = {"command": [sys.executable, "-I", str(SERVER), str(pids)], "call_timeout_s": 600}
    catalogue = tmp_path / "servers.json"
    catalogue.write_text(json.dumps({"servers": {"spawning": entry}}))
    call = {"kind": "tool_call", "arguments": {"name": "wait", "arguments": {"seconds": 300}}}
    task = {"id": "wait", "instruction": "Wait.", "metadata": {"server": "spawning"}, "actions": [call]}
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task | {"id": f"wait-{n}"} for n in range(2)])
    collector = start(
        "collectors.mcp", "--backend", "local", "--servers", str(catalogue), "--policy", "scripted",
        "--tasks", str(tasks), "--workers", "2", "--episodes", "2", "--out", str(tmp_path / "out"),
    )  # fmt: skip

    def servers_up() -> bool:
        live = [p for p, (_, argv) in _processes().items() if str(SERVER) in argv]
        return collector.poll() is not None or len(live) >= 2 and len(pids_in(pids)) >= 8

    wait_until(servers_up, "the episodes' servers")  # 4 pids each; the preflight's server ends first
    assert collector.poll() is None, collector.stderr.read() if collector.stderr else ""
    time.sleep(1.0)  # the calls are in flight
    kill_and_check(collector, pids_in(pids))


@pytest.mark.serial  # kill timing under load: it raced with the other xdist worker once (three runs)
@pytest.mark.tmux
@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("bwrap", marks=pytest.mark.bwrap),
        "local",
    ],
)
def test_terminal_collector_killed_leaves_no_tmux_server_or_process(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    pids, running = tmp_path / "pids", tmp_path / "running"
    marked = backend == "local"  # elsewhere the shell cannot write to this host's files
    command = (orphan_maker(pids) + f"echo $$ >> {running}; " if marked else "") + f"sleep {HANG}"
    tasks = write_tasks(tmp_path / "tasks.jsonl", [{"id": "hang", "actions": [{"command": command}]}])
    args = ["--backend", backend, "--policy", "scripted", "--tasks", str(tasks), "--command-timeout", "600"]
    args += ["--sandboxes", "2", "--out", str(tmp_path / "out")]
    if backend == "docker":
        args += ["--memory", request.getfixturevalue("orphan_containers")]
    collector = subprocess.Popen(
        collector_argv(*args, "--episodes", "2"), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip

    def episodes_running() -> bool:
        if collector.poll() is not None:
            return True
        if marked:
            return len(pids_in(running)) >= 2
        return len(hanging()) >= 2

    wait_until(episodes_running, "both episodes' commands")
    assert collector.poll() is None, collector.stderr.read() if collector.stderr else ""
    servers = {
        p for p in held_by(collector.pid) if os.path.basename(_processes().get(p, (0, [""]))[1][0]) == "tmux"
    }
    assert len(servers) >= 4, f"expected 2 sandboxes (plus spares) with a client and a server each: {servers}"
    kill_and_check(collector, pids_in(pids) | pids_in(running) | hanging(), docker=backend == "docker")

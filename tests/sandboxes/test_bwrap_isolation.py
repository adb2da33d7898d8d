"""A bwrap sandbox sees only its own world: no process it can see carries the recorder's
environment, and the host's root filesystem (its checkouts, homes and data) is not there.

The terminal and SWE collectors run for real as subprocesses with planted secrets in their
environment, on bwrap, with scripted commands that read `/proc/*/environ` of every visible pid, list
the root and the host's directories, and read files planted in the checkout and in root's home.
Every recorded observation is searched for the secrets and the planted contents. The MCP jail
gets the same reads from a real (stdio) server started through it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.checks import process_exists
from sandboxes.containment import LIMITS_PREFIX, own_cgroups
from sandboxes.terminal import TerminalConfig, TerminalSandbox, make_backend
from sandboxes.terminal.reaper import reap_orphans
from schemas import read_trajectories
from schemas.records import Task

pytestmark = [pytest.mark.bwrap]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = uuid.uuid4().hex[:12]
SECRETS = {
    "OPENAI_API_KEY": f"planted-secret-openai-{TOKEN}",
    "AWS_SECRET_ACCESS_KEY": f"planted-secret-aws-{TOKEN}",
    "HF_TOKEN": f"planted-secret-hf-{TOKEN}",
    "AGENTWORLD_SERVE_TOKEN": f"planted-secret-serve-{TOKEN}",
}
PLANTED = f"planted-host-file-{TOKEN}"
# Every pid the sandbox can see, each one's environment (NUL-separated) on lines of its own.
ENVIRON = (
    "for p in /proc/[0-9]*; do echo \"== $p $(tr '\\0' ' ' < $p/cmdline)\"; tr '\\0' '\\n' < $p/environ; done"
)
LISTING = "ls / /home /root /work /opt /srv /var /mnt /media /sys 2>&1 | head -60"


@pytest.fixture
def planted() -> Iterator[list[Path]]:
    """Files with a known content in the checkout and in root's home (both outside the jail)."""
    paths = [ROOT / f".planted-{TOKEN}.txt", Path.home() / f".planted-{TOKEN}.txt"]
    for path in paths:
        path.write_text(PLANTED + "\n")
        os.chmod(path, 0o644)  # world-readable: only the jail can keep it out of sight
    yield paths
    for path in paths:
        path.unlink(missing_ok=True)


def _reads(planted: list[Path]) -> list[str]:
    # A listing that shows a planted file prints "listed: 42" (the command itself does not say it).
    listed = 'grep -q planted- && echo "listed: $((40+2))"'
    return [ENVIRON, LISTING, *(f"cat {p} 2>&1; ls -a {p.parent} 2>&1 | {listed}" for p in planted)]


def _env() -> dict[str, str]:
    return {**os.environ, **SECRETS}


def _recorded(out: Path) -> list[str]:
    """Every trajectory under `out` (all its fields) and each of its observation texts, last
    the last step's; then every other file written there (attachments), as text."""
    found = list(read_trajectories(str(out), validate=True))
    assert found, f"nothing recorded under {out}"
    texts = []
    for trajectory in found:
        texts.append(repr(trajectory))
        texts += [trajectory.initial_observation.text, *(step.observation.text for step in trajectory.steps)]
    files = [p for p in out.rglob("*") if p.is_file() and p.suffix != ".parquet"]
    return [*(p.read_bytes().decode("utf-8", "replace") for p in files), *texts]


def _assert_nothing_leaked(texts: list[str], planted: list[Path], root_shown: bool = False) -> None:
    """`root_shown`: /root is open inside (an MCP server's Python lives there, bound alone)."""
    joined = "\n".join(texts)
    leaked = [name for name, value in SECRETS.items() if value in joined]
    assert not leaked, f"secrets in the observations: {leaked}"
    assert PLANTED not in joined, "a planted host file was read in the sandbox"
    assert "listed: 42" not in joined, "a planted file was listed in the sandbox"
    looked = joined.count("No such file or directory") + joined.count("Permission denied")
    assert looked >= len(planted), "the planted files were not looked for"
    # The reads did run: environments were printed, and the root is the sandbox's own.
    assert "== /proc/1 bwrap" in joined and "PATH=" in joined, joined[:3000]
    assert "ls: cannot access '/opt'" in joined and "ls: cannot access '/srv'" in joined, joined[:3000]
    # root's home is there, as on any system, but empty and closed to the agent.
    assert root_shown or "ls: cannot open directory '/root': Permission denied" in joined


def test_terminal_collector_on_bwrap_shows_no_secret_nor_host_file(
    tmp_path: Path, planted: list[Path]
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "peek", "actions": [{"command": c} for c in _reads(planted)]}) + "\n")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "collectors.terminal", "--no-progress", "--backend", "bwrap"]
    argv += ["--policy", "scripted", "--tasks", str(tasks), "--episodes", "1", "--out", str(out)]
    done = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    _assert_nothing_leaked(_recorded(out), planted)


def test_swe_collector_on_bwrap_shows_no_secret_nor_host_file(tmp_path: Path, planted: list[Path]) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("isolation\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "first"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    steps = [{"kind": "bash", "arguments": {"command": c}} for c in [*_reads(planted), "cat README"]]
    task = {"id": "peek", "instruction": "Look around.", "actions": steps}
    task["metadata"] = {"template": str(repo), "test_command": ["true"]}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "collectors.swe", "--no-progress", "--backend", "bwrap"]
    argv += ["--policy", "scripted", "--tasks", str(tasks), "--episodes", "1", "--out", str(out)]
    done = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    texts = _recorded(out)
    _assert_nothing_leaked(texts, planted)
    assert "isolation" in texts[-1], "the repository's own copy is readable at /repo"


def test_mcp_collector_on_bwrap_shows_no_secret_nor_host_file(tmp_path: Path, planted: list[Path]) -> None:
    server = ROOT / "tests" / "sandboxes" / "mcp" / "servers" / "peek.py"
    # -I: the script's directory must not shadow the mcp package.
    entry = {"command": [sys.executable, "-I", str(server)], "startup_timeout_s": 60}
    catalogue = tmp_path / "servers.json"
    catalogue.write_text(json.dumps({"servers": {"peek": entry}}))
    calls = [
        {"kind": "tool_call", "arguments": {"name": "run", "arguments": {"command": c}}}
        for c in _reads(planted)
    ]
    task = {"id": "peek", "instruction": "Look around.", "metadata": {"server": "peek"}, "actions": calls}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(task) + "\n")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "collectors.mcp", "--no-progress", "--backend", "bwrap"]
    argv += ["--servers", str(catalogue), "--policy", "scripted", "--tasks", str(tasks)]
    argv += ["--workers", "1", "--episodes", "1", "--out", str(out)]
    done = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # The server runs on this venv's Python: the venv and its base interpreter (under /root when
    # it is pyenv's) are bound read-only, and nothing else of those directories.
    _assert_nothing_leaked(_recorded(out), planted, root_shown=Path(sys.base_prefix).is_relative_to("/root"))


def _own_cgroup_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller ("" for v2), read from /proc/self/cgroup."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if hierarchy != "0" else [""]:
            found[name] = path
    return found


def _cgroup_of(pid: int, controller: str) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if controller in (controllers.split(",") if hierarchy != "0" else [""]):
            return path
    raise AssertionError(f"pid {pid} has no {controller or 'v2'} cgroup")


@pytest.mark.tmux
def test_sandbox_cgroups_lie_under_the_collectors_own() -> None:
    own = _own_cgroup_paths()
    config = TerminalConfig(backend=make_backend("bwrap", limits="cgroup"))
    with TerminalSandbox(config) as sandbox:
        sandbox.reset(Task(id="cgroups"))
        groups = [r[5:] for r in sandbox.resources() if r.startswith("path:/sys/fs/cgroup/")]
        limits = [g for g in groups if os.path.basename(g).startswith(LIMITS_PREFIX)]
        assert limits, groups
        for group in limits:
            assert os.path.basename(group).startswith(f"{LIMITS_PREFIX}{os.getpid()}-terminal-")
            pids = [int(p) for p in Path(group, "cgroup.procs").read_text().split()]
            assert pids, f"nothing runs in {group}"
            controller = next(c for c in ("memory", "pids", "cpu", "") if group.startswith(own_cgroups()[c]))
            # Where the kernel says the sandbox's processes are: right below this process's cgroup.
            expected = os.path.join(own[controller], os.path.basename(group))
            assert {_cgroup_of(pid, controller) for pid in pids} == {expected}


@pytest.mark.serial  # reaps machine-wide: a collector on another worker would reap first
def test_reaper_finds_a_dead_collectors_cgroups_under_its_own() -> None:
    # A collector that made a sandbox's limit cgroups, started a process in them, and was killed.
    script = (
        "import os, subprocess, sys, time\n"
        "from sandboxes.containment import join_cgroups_argv\n"
        "from sandboxes.terminal.backends import make_cgroups\n"
        "from sandboxes.terminal.config import BwrapBackend\n"
        "groups = make_cgroups('terminal', BwrapBackend())\n"
        "argv = join_cgroups_argv([g + '/cgroup.procs' for g in groups], ['sleep', '300'])\n"
        "child = subprocess.Popen(argv, start_new_session=True)\n"
        "time.sleep(0.5)\n"
        "print(child.pid, *groups, flush=True)\n"
        "time.sleep(300)\n"
    )
    collector = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert collector.stdout is not None
    pid, *groups = collector.stdout.readline().split()
    collector.kill()
    collector.wait()
    assert groups and all(os.path.isdir(g) for g in groups) and process_exists(int(pid))
    for group in groups:
        assert os.path.dirname(group) in own_cgroups().values(), group
    removed = reap_orphans()
    assert removed["process_boxes"] >= 1, removed
    assert not [g for g in groups if os.path.exists(g)], "the dead collector's cgroups are still there"
    assert not process_exists(int(pid)), "the process in them still runs"


# The local desktop's transport, run by a process with the secrets in its environment: what the
# guest's processes can read, one observation line per output line.
DESKTOP = """
import json, sys
from sandboxes.base import SandboxCrashedError
from sandboxes.desktop.local import LocalTransport
transport = LocalTransport()
try:
    channel = transport.spawn(["sh", "-c", sys.argv[1]], {})
    lines = []
    try:
        while True:
            lines.append(channel.recv_line(60))
    except SandboxCrashedError:
        pass
finally:
    transport.close()
print(json.dumps(lines))
"""


def test_local_desktop_guest_sees_no_secret_nor_host_file(planted: list[Path]) -> None:
    script = "; ".join(_reads(planted))
    argv = [sys.executable, "-c", DESKTOP, script]
    done = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    _assert_nothing_leaked(json.loads(done.stdout.splitlines()[-1]), planted)

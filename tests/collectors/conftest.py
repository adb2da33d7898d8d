"""Helpers for collector tests: the real CLI in a subprocess or in this process, real docker, real
bwrap."""

from __future__ import annotations

import importlib
import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from collectors.policies.base import Policy
from sandboxes.base import Sandbox
from sandboxes.terminal.config import DEFAULT_IMAGE, parse_memory
from schemas import read_trajectories
from schemas.records import Action, Observation, Task, Trajectory

ROOT = Path(__file__).resolve().parents[2]
LABEL = "label=agentworld.sandbox=terminal"
# Each collector with a policy whose episode steps at once: the scripted one where the first
# embedded task has actions, else the domain's explorer.
QUICK_POLICY = {
    "terminal": "scripted",
    "web": "explorer",
    "search": "scripted",
    "mcp": "scripted",
    "swe": "scripted",
    "desktop": "scripted",
    "android": "explorer",
}


def collector_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "collectors.terminal", "--no-progress", *args]


def run_collector(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(collector_argv(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def run_import(fmt: str, source: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m collectors.importers FORMAT --input SOURCE --out OUT --no-progress ARGS` as a user
    runs it (one BLAS thread: the suite's other workers keep the cores)."""
    argv = [sys.executable, "-m", "collectors.importers", fmt, "--input", str(source), "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [*argv, "--no-progress", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )


def play(
    sandbox: Sandbox, policy: Policy, task: Task, rng: random.Random, steps: int
) -> list[tuple[Action, Observation]]:
    """What the fleet runner does for one episode, without writing it: each action and the
    observation it brought, until the policy ends the episode or `steps` were played."""
    observation = sandbox.reset(task)
    policy.reset(task, observation, rng)
    played = []
    for _ in range(steps):
        action = policy.act(observation)
        if action is None:
            break
        observation = sandbox.step(action).observation
        played.append((action, observation))
    return played


def run_main(domain: str, *args: str) -> int:
    """`python -m collectors.<domain> --no-progress ARGS` in this process (what only checks a refusal
    needs): its exit code, argparse's SystemExit included; its output is in pytest's capsys."""
    main = importlib.import_module(f"collectors.{domain}.__main__").main
    try:
        return main(["--no-progress", *args])
    except SystemExit as exc:
        return int(exc.code or 0)


def start_collector(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        collector_argv(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def write_tasks(path: Path, tasks: list[dict]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def trajectories(out: Path) -> list[Trajectory]:
    return list(read_trajectories(str(out), validate=True))


def assert_exactly_once(out: Path, episodes: int) -> list[Trajectory]:
    """Every slot 0..episodes-1 recorded once; no temporaries; every Parquet file readable."""
    found = trajectories(out)
    slots = Counter(t.task.metadata["slot"] for t in found)
    assert sorted(slots) == list(range(episodes)), f"slots recorded: {sorted(slots)}"
    assert max(slots.values()) == 1, f"duplicates: {[s for s, n in slots.items() if n > 1]}"
    assert not [p for p in out.rglob(".tmp-*")], "temporary files left behind"
    for shard in out.rglob("*.parquet"):
        pq.read_table(shard)
    return found


def containers(memory: str | None = None) -> set[str]:
    """Terminal sandbox containers; with `memory` (e.g. "301m"), only those given that limit, which
    tells a test's own containers apart from those of other test runs on the same engine."""
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", LABEL], capture_output=True, text=True)
    ids = set(listed.stdout.split())
    if memory is None or not ids:
        return ids
    limit = str(parse_memory(memory))
    inspected = subprocess.run(
        ["docker", "inspect", "-f", "{{.Id}} {{.HostConfig.Memory}}", *ids], capture_output=True, text=True
    )
    return {line.split()[0][:12] for line in inspected.stdout.splitlines() if line.split()[1:] == [limit]}


@pytest.fixture(scope="session")
def terminal_image() -> str:
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.fail("docker is not available: install docker.io and start dockerd")
    if subprocess.run(["docker", "image", "inspect", DEFAULT_IMAGE], capture_output=True).returncode:
        pytest.fail(f"image {DEFAULT_IMAGE} is missing: run `bash infra/terminal-image/build.sh`")
    return DEFAULT_IMAGE


ORPHAN_MEMORY = "263m"


@pytest.fixture
def orphan_containers(terminal_image: str) -> Iterator[str]:
    """A collector killed with -9 cannot remove its containers: the test runs it with
    `--memory ORPHAN_MEMORY`, and the containers with that limit are removed afterwards."""
    yield ORPHAN_MEMORY
    leftover = containers(ORPHAN_MEMORY)
    if leftover:
        subprocess.run(["docker", "rm", "-f", *leftover], capture_output=True)


@pytest.fixture(scope="session")
def bwrap() -> None:
    for tool in ("bwrap", "tmux"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (apt-get install {tool})")

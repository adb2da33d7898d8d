"""A two-shard terminal collection into a real local S3 server (moto), one shard SIGKILLed
mid-run and rerun: every episode recorded exactly once across the shards, nothing torn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas import finished_ids, read_trajectories
from tests.collectors.conftest import ROOT
from tests.support_s3 import S3Server, running_s3_server, s3_client, s3_objects

EPISODES = 12  # six per shard
# Shard 1's (odd) episodes nap longer: it must still be running when its twin tries to start.
TASKS = [
    {"id": f"nap-{i:02d}", "actions": [{"command": f"sleep {1 + 2 * (i % 2)}; echo done-{i}"}]}
    for i in range(EPISODES)
]


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    with running_s3_server() as started:
        yield started


def _argv(out: str, tasks: str, shard: str) -> list[str]:
    return [
        sys.executable, "-m", "collectors.terminal", "--no-progress", "--backend", "bwrap",
        "--policy", "scripted", "--tasks", tasks, "--shard", shard, "--shard-rows", "1",
        "--flush-interval", "1", "--out", out,
    ]  # fmt: skip


def _start(server: S3Server, out: str, tasks: str, shard: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _argv(out, tasks, shard), cwd=ROOT, env=server.child_env(), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _run(
    server: S3Server, out: str, tasks: str, shard: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(out, tasks, shard), cwd=ROOT, env=server.child_env(), capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def _kill_tmux_clients_of(pid: int) -> None:
    """A collector killed with -9 leaves its tmux control clients (named after its pid) running;
    the rerun reaps the servers, these are ended here."""
    marker = f"agentworld-{pid}-".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"tmux" in (entry / "cmdline").read_bytes() and marker in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGTERM)
        except (OSError, ProcessLookupError):
            continue


def _wait_for(condition, timeout: float, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.mark.bwrap
def test_two_shards_one_killed_and_rerun_record_every_episode_once(server: S3Server, bwrap: None) -> None:
    bucket = server.bucket("fleet")
    out, tasks = f"s3://{bucket}/run", f"s3://{bucket}/tasks.jsonl"
    body = "".join(json.dumps(task) + "\n" for task in TASKS).encode()
    s3_client(server).put_object(Bucket=bucket, Key="tasks.jsonl", Body=body)
    shard0, shard1 = _start(server, out, tasks, "0/2"), _start(server, out, tasks, "1/2")
    try:
        with server.use_in_process():
            _wait_for(lambda: finished_ids(f"{out}/shard-0-of-2"), 120, "shard 0's first commit")
        assert shard0.poll() is None, "shard 0 ended before the test could kill it"
        shard0.send_signal(signal.SIGKILL)
        shard0.wait(timeout=30)
        # A second collector for a shard that is running is refused by the lease (exit 2).
        twin = _run(server, out, tasks, "1/2", timeout=120)
        assert shard1.poll() is None, "shard 1 ended before its twin was tried"
        assert twin.returncode == 2, twin.stderr[-2000:]
        assert "in use by another collector" in twin.stderr and f"pid {shard1.pid}" in twin.stderr
        _, err1 = shard1.communicate(timeout=180)
        assert shard1.returncode == 0, err1[-3000:]
    finally:
        for process in (shard0, shard1):
            if process.poll() is None:
                process.kill()
                process.communicate(timeout=30)
        _kill_tmux_clients_of(shard0.pid)
    with server.use_in_process():
        kept = finished_ids(f"{out}/shard-0-of-2")
    assert 1 <= len(kept) < EPISODES // 2, "shard 0 was to be killed part-way"
    # The restarted pod (same shard, same --out) takes over its own lease and resumes its part.
    rerun = _run(server, out, tasks, "0/2", timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"skipped as already finished: {len(kept)}" in rerun.stdout

    with server.use_in_process():
        found = list(read_trajectories(out, validate=True))
    slots = Counter(t.task.metadata["slot"] for t in found)
    assert sorted(slots) == list(range(EPISODES)) and max(slots.values()) == 1, slots
    assert all(t.outcome.status == "completed" for t in found)
    assert all(f"done-{t.task.metadata['slot']}" in t.steps[-1].observation.text for t in found)
    keys = s3_objects(server, bucket, "run/")
    assert not [key for key in keys if "/.tmp-" in key], "temporary objects left behind"
    assert not [key for key in keys if key.endswith("/.lock")], "a lease outlived its run"
    assert {"run/shard-0-of-2/summary.json", "run/shard-1-of-2/summary.json"} <= set(keys)
    # Slots of shard i are those with slot % 2 == i, whichever pod recorded them.
    for key, parity in (("shard-0-of-2", 0), ("shard-1-of-2", 1)):
        with server.use_in_process():
            part = list(read_trajectories(f"{out}/{key}"))
        assert {t.task.metadata["slot"] % 2 for t in part} == {parity}

    stats = subprocess.run(
        [sys.executable, "-m", "schemas", "stats", out], cwd=ROOT, env=server.child_env(),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert stats.returncode == 0, stats.stderr[-2000:]
    assert f"{EPISODES}" in stats.stdout.split("terminal", 1)[1].split()[0], stats.stdout

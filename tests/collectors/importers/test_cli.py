"""`python -m collectors.importers` as a user runs it: help, refusals, and a killed import resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from collectors.importers import FORMATS
from schemas import read_trajectories
from tests.collectors.importers.test_openai_chat import mcp_row

REPO = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "collectors.importers", *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=ENV)


def test_help_lists_every_format_with_its_dataset_and_examples():
    done = cli("--help")
    assert done.returncode == 0, done.stderr
    for name in FORMATS:
        assert f"\n  {name} " in done.stdout
    assert "unavailable" not in done.stdout
    assert "examples:" in done.stdout and "--input" in done.stdout
    cores = len(os.sched_getaffinity(0))
    assert f"(default: the cores this run may use, {cores})" in " ".join(done.stdout.split())


def test_refusals_name_the_fix(tmp_path: Path):
    unknown = cli("parquet_of_dreams", "--input", "x", "--out", str(tmp_path / "o"))
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr
    missing = cli("openai_chat", "--input", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o"))
    assert missing.returncode == 2
    assert "nope.jsonl does not exist; give a file, a folder or a glob" in missing.stderr
    assert not (tmp_path / "o").exists()  # a refused run leaves no output folder behind
    workers = cli("openai_chat", "--input", str(tmp_path), "--out", str(tmp_path / "o"), "--workers", "0")
    assert workers.returncode == 2 and "--workers must be >= 1" in workers.stderr


def test_a_killed_import_keeps_its_shards_and_a_rerun_finishes_without_duplicates(tmp_path: Path):
    rows = 4_000
    source = tmp_path / "chats.jsonl"
    with source.open("w") as out:
        for i in range(rows):
            out.write(json.dumps({**mcp_row(), "id": f"chat-{i}"}) + "\n")
    out_dir = tmp_path / "out"
    command = [sys.executable, "-m", "collectors.importers", "openai_chat", "--input", str(source)]
    command += ["--out", str(out_dir), "--shard-rows", "50", "--no-progress"]
    proc = subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    manifest = out_dir / "_manifest"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(list(manifest.glob("*.json"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    first = {t.trajectory_id for t in read_trajectories(str(out_dir), validate=True)}
    assert 150 <= len(first) < rows, "the kill should land mid-import"

    done = cli("openai_chat", "--input", str(source), "--out", str(out_dir), "--no-progress")
    assert done.returncode == 0, done.stderr
    assert f"already imported by an earlier run (skipped): {len(first):,}" in done.stdout
    ids = [t.trajectory_id for t in read_trajectories(str(out_dir))]
    assert len(ids) == len(set(ids)) == rows

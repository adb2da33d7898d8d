"""A refused run (exit code 2) leaves nothing behind: no --out folder it created, no lock.

Real collectors in this process (their `main(argv)`), refused at each stage: by argparse, on a task
file, on a policy's options, on a task's repository, with --shard (a sub-root), and on an --out that
already holds data.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.collectors.conftest import run_main


@pytest.fixture
def refuse(capsys: pytest.CaptureFixture[str]):
    def refused(domain: str, *args: str) -> str:
        """`python -m collectors.<domain> ARGS`, which must refuse with exit code 2; its stderr."""
        code = run_main(domain, *args)
        printed = capsys.readouterr()
        assert code == 2, printed.out[-2000:] + printed.err[-2000:]
        return printed.err

    return refused


def swe_task(tmp_path: Path, template: Path) -> Path:
    task = {"id": "mine", "instruction": "fix it", "metadata": {"template": str(template)}}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(task) + "\n")
    return path


@pytest.mark.parametrize(
    ("domain", "args", "message"),
    [
        ("terminal", ["--episodes", "-1"], "--episodes must be >= 0"),
        (
            "terminal",
            ["--tasks", "/nonexistent/tasks.jsonl"],
            "cannot read task file /nonexistent/tasks.jsonl",
        ),
        ("swe", ["--backend", "nowhere"], "invalid choice: 'nowhere'"),
        ("search", ["--policy", "llm"], "--policy llm needs --llm-base-url"),
        ("mcp", ["--policy", "replay"], "--policy replay needs --replay-from"),
        ("desktop", ["--policy", "replay"], "--policy replay needs --replay-from"),
    ],
)
def test_a_refused_run_creates_no_out_folder(
    tmp_path: Path, domain: str, args: list[str], message: str, refuse
) -> None:
    out = tmp_path / "new" / "out"
    assert message in refuse(domain, "--out", str(out), *args)
    assert not (tmp_path / "new").exists()


def test_a_missing_swe_repository_is_named_as_missing(tmp_path: Path, refuse) -> None:
    missing = tmp_path / "no-such-repo"
    stderr = refuse(
        "swe", "--backend", "local", "--tasks", str(swe_task(tmp_path, missing)), "--out", str(tmp_path / "o")
    )
    assert f"task mine: its repository {missing} does not exist" in stderr
    assert "does not work with --backend" not in stderr
    assert not (tmp_path / "o").exists()
    a_file = tmp_path / "a-file"
    a_file.write_text("not a repository")
    stderr = refuse(
        "swe", "--backend", "local", "--tasks", str(swe_task(tmp_path, a_file)), "--out", str(tmp_path / "o")
    )
    assert f"its repository {a_file} is not a directory" in stderr


def test_a_refused_shard_leaves_neither_the_dataset_nor_its_shard_folder(tmp_path: Path, refuse) -> None:
    out = tmp_path / "dataset"
    refuse("terminal", "--out", str(out), "--shard", "1/2", "--tasks", str(tmp_path / "missing.jsonl"))
    assert not out.exists()


def test_a_refusal_on_an_existing_out_keeps_its_data_and_leaves_no_lock(tmp_path: Path, refuse) -> None:
    out = tmp_path / "out"
    (out / "domain=terminal").mkdir(parents=True)
    (out / "domain=terminal" / "part-0.parquet").write_bytes(b"earlier data")
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    refuse("terminal", "--out", str(out), "--tasks", str(tmp_path / "missing.jsonl"))
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert (out / "domain=terminal" / "part-0.parquet").read_bytes() == b"earlier data"

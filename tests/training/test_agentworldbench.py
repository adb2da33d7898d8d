"""python -m training.agentworldbench infer/judge/score on records rendered from REAL trajectories, with a
REAL llama.cpp server (SmolLM2-135M) as both the world model and the judge."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from schemas import read_trajectories
from schemas.render import agentworldbench_record
from tests.llm_server import LLMServer, llm_server_fixture  # noqa: F401 (registers `llm_server`)
from tests.training.conftest import OFFLINE, ROOT, TERMINAL_RUN
from training.agentworldbench import score
from training.judge import DIMENSIONS


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "training.agentworldbench", *args]
    return subprocess.run(argv, cwd=ROOT, env=OFFLINE, capture_output=True, text=True, timeout=300)


def write_records(path: Path) -> list[dict]:
    first, second = list(read_trajectories(str(TERMINAL_RUN)))[:2]
    records = [
        agentworldbench_record(first, 1),
        agentworldbench_record(first, 2),
        agentworldbench_record(second, 1),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.llm
def test_infer_judge_score_resumable(tmp_path: Path, llm_server: LLMServer) -> None:
    data = tmp_path / "terminal_test.jsonl"
    records = write_records(data)
    preds, judged = tmp_path / "preds.jsonl", tmp_path / "judged.jsonl"
    infer = ["infer", "--data", str(data), "--model", llm_server.base_url, "--out", str(preds)]
    infer += ["--max-new-tokens", "48", "--no-progress"]
    done = bench(*infer)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = lines(preds)
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in records)
    for row in rows:
        assert isinstance(row["reply"], str) and row["format_failure"] == (row["prediction"] is None)
    # Resumable: a rerun finds every id done and asks nothing.
    again = bench(*infer)
    assert again.returncode == 0 and "3 already done, 0 predicted" in again.stdout
    assert lines(preds) == rows

    judge = ["judge", "--data", str(data), "--predictions", str(preds), "--judge-url", llm_server.base_url]
    judge += ["--out", str(judged), "--max-chars", "500", "--max-new-tokens", "64", "--no-progress"]
    done = bench(*judge)
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts = lines(judged)
    assert sorted(v["id"] for v in verdicts) == sorted(r["id"] for r in records)
    for v in verdicts:
        # A 135M judge often rambles: then the failure is recorded with its reason, never a crash.
        if v["scores"] is None:
            assert v["error"]
        else:
            assert set(v["scores"]) == set(DIMENSIONS) and all(1 <= s <= 5 for s in v["scores"].values())
    assert bench(*judge).returncode == 0 and lines(judged) == verdicts

    out_json = tmp_path / "scores.json"
    done = bench("score", "--judged", str(judged), "--json", str(out_json))
    assert done.returncode == 0, done.stderr
    table = json.loads(out_json.read_text())
    assert table["overall"]["samples"] == 3 and table["terminal"]["samples"] == 3
    assert table["overall"]["judge_failures"] == sum(v["scores"] is None for v in verdicts)
    assert "terminal" in done.stdout and "overall" in done.stdout and "factuality" in done.stdout


def test_score_follows_the_benchmark_scale() -> None:
    full = {d: 5 for d in DIMENSIONS}
    judged = {
        "a": {"id": "a", "task": "terminal", "scores": full, "percent": {d: 100.0 for d in DIMENSIONS}},
        "b": {
            "id": "b",
            "task": "terminal",
            "scores": {d: 3 for d in DIMENSIONS},
            "percent": {d: 50.0 for d in DIMENSIONS},
        },
        "c": {"id": "c", "task": "mcp", "scores": None, "percent": {}, "error": "unreadable"},
    }
    table = score(judged)
    assert table["terminal"]["score"] == 75.0 and table["terminal"]["factuality"] == 75.0
    assert table["mcp"]["judge_failures"] == 1 and table["mcp"]["score"] is None
    assert table["overall"]["samples"] == 3 and table["overall"]["score"] == 75.0


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "terminal"}\n')
    done = bench(
        "infer", "--data", str(bad), "--model", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "p")
    )
    assert done.returncode == 2 and "bad.jsonl:1" in done.stderr and "missing" in done.stderr

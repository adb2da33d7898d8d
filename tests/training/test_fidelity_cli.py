"""The fidelity report end to end: REAL recorded trajectories, REAL bwrap replays for the noise floor, a
REAL llama.cpp server as the model and a random-weight Qwen3 as the untrained baseline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.llm_server import LLMServer, llm_server_fixture  # noqa: F401 (registers `llm_server`)
from tests.training.conftest import OFFLINE, ROOT, TERMINAL_RUN


def run_fidelity(out: Path, server: LLMServer, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "training.fidelity",
        "--real",
        str(TERMINAL_RUN),
        "--model",
        server.base_url,
    ]
    argv += ["--out", str(out), "--limit-trajectories", "2", "--max-turns", "2", "--max-new-tokens", "48"]
    argv += ["--context-chars", "3000", "--baseline-model", "qwen3-tiny", "--no-progress", *extra]
    done = subprocess.run(argv, cwd=ROOT, env=OFFLINE, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.llm
@pytest.mark.bwrap
@pytest.mark.tmux
def test_fidelity_report_end_to_end_and_rerun_from_cache(tmp_path: Path, llm_server: LLMServer) -> None:
    out = tmp_path / "report"
    first = run_fidelity(out, llm_server)
    report = json.loads((out / "report.json").read_text())
    meta, systems, noise = report["meta"], report["systems"], report["noise_floor"]
    # 2 trajectories x 2 turns; closed-loop turn 1 is the teacher-forced prompt, answered from the cache
    assert meta["turns"] == 4
    assert meta["requests"] == 4 + 2 + 4 and meta["cache_hits"] == 2
    assert set(systems) == {
        "model/teacher_forced",
        "model/closed_loop",
        "repeat_previous/teacher_forced",
        "untrained/teacher_forced",
        "real_vs_real",
    }
    for name, agg in systems.items():
        terminal = agg["by_domain"]["terminal"]
        assert 0.0 <= terminal["edit_similarity"] <= 1.0 and terminal["turns"] > 0, name
        assert set(agg["by_turn"]) == {"1", "2"}, name
    # The recorded data is from another day: the replays' clock differs, so dates are volatile, and real
    # runs agree far better than the "nothing changes" baseline.
    assert noise["replays"] == 2 and noise["summary"]["turns_with_volatile"] >= 1
    assert systems["real_vs_real"]["overall"]["turns"] == 8
    rvr = systems["real_vs_real"]["overall"]
    assert rvr["edit_similarity"] > systems["repeat_previous/teacher_forced"]["overall"]["edit_similarity"]
    assert rvr["format_valid"] == 1.0
    assert report["examples"]["worst"]["edit_similarity"] <= report["examples"]["median"]["edit_similarity"]

    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for name in ("untrained/teacher_forced", "repeat_previous/teacher_forced", "real_vs_real", "## terminal"):
        assert name in md
    assert "Noise floor" in md and "Noise floor" in html
    assert "<svg" in html and "<polyline" in html and 'class="diff"' in html
    # self-contained: nothing loaded from elsewhere
    assert "<script" not in html and "<link" not in html and "src=" not in html
    assert "report.html" in first.stdout

    # A rerun asks nothing: every reply comes from the cache, every replay from replays.jsonl.
    cached_lines = (out / "predictions.jsonl").read_text().count("\n")
    started = time.monotonic()
    run_fidelity(out, llm_server)
    rerun = json.loads((out / "report.json").read_text())
    assert rerun["meta"]["requests"] == 0 and rerun["meta"]["cache_hits"] == 12
    assert (out / "predictions.jsonl").read_text().count("\n") == cached_lines == 10
    assert rerun["systems"] == systems
    assert time.monotonic() - started < 60


def test_cli_errors_say_what_to_do(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "training.fidelity", "--real", str(tmp_path / "nothing"), "--model", "x"]
    done = subprocess.run(
        [*argv, "--out", str(tmp_path / "o")],
        cwd=ROOT,
        env=OFFLINE,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        done.returncode == 2 and "cannot read --real" in done.stderr and "collectors.terminal" in done.stderr
    )
    helped = subprocess.run(
        [sys.executable, "-m", "training.fidelity", "--help"],
        cwd=ROOT,
        env={**os.environ, **OFFLINE},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert helped.returncode == 0 and "examples:" in helped.stdout and "--replays" in helped.stdout

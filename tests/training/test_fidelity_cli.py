"""The fidelity report end to end: REAL recorded trajectories, REAL bwrap replays for the noise floor, a
REAL llama.cpp server as the model and a random-weight Qwen3 as its base."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.llm_server import LLMServer
from tests.schemas.corrupt_recording import dataset_with_corrupt_tail
from tests.training.conftest import OFFLINE, ROOT, TERMINAL_RUN
from training.fidelity.__main__ import main as fidelity_main


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
    argv += ["--context-chars", "3000", "--base", "qwen3-tiny", "--no-progress", *extra]
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
        "base/teacher_forced",
        "real_vs_real",
    }
    for name, agg in systems.items():
        terminal = agg["by_domain"]["terminal"]
        assert 0.0 <= terminal["edit_similarity"] <= 1.0 and terminal["turns"] > 0, name
        assert set(agg["by_turn"]) == {"1", "2"}, name
    # The recorded data is from another day: the replays' clock differs, so dates are volatile, and real
    # runs agree far better than the "nothing changes" baseline.
    assert noise["replays"] == 2 and noise["summary"]["turns_with_volatile"] >= 1
    assert noise["counts"]["replays"] == 4 and noise["counts"]["failed"] == 0
    assert 0 < noise["summary"]["volatile_share_mean"] < 0.5
    assert systems["real_vs_real"]["overall"]["turns"] == 8
    rvr = systems["real_vs_real"]["overall"]
    assert rvr["edit_similarity"] > systems["repeat_previous/teacher_forced"]["overall"]["edit_similarity"]
    assert rvr["format_valid"] == 1.0
    headline = report["headline"]["terminal"]
    assert headline["ceiling"]["edit_similarity"] == rvr["edit_similarity"]
    model = headline["systems"]["model/teacher_forced"]
    assert model["share_of_ceiling"] == model["edit_similarity"] / rvr["edit_similarity"]
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert all(0.0 <= t["volatile_share"] <= 1.0 for t in turns if t["series"] != "real_vs_real")
    # the comparison stands beside the same ceiling
    assert report["comparison"]["systems"] == ["model", "base", "repeat_previous"]
    assert report["comparison"]["domains"]["terminal"]["ceiling"] == pytest.approx(rvr["edit_similarity"])

    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    for name in ("base/teacher_forced", "repeat_previous/teacher_forced", "real_vs_real", "## terminal"):
        assert name in md
    assert "Noise floor" in md and "real vs real (ceiling)" in html
    assert "<svg" in html and "<polyline" in html
    # every compared model turn (teacher-forced and closed-loop) has its diff
    assert html.count('<details class="turn') == 8 and html.count('class="diff"') == 8
    # self-contained: nothing loaded from elsewhere
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert "report.html" in first.stdout and "share of the real-vs-real ceiling" in first.stdout

    # A rerun asks nothing: every reply comes from the cache, every replay from replays.jsonl.
    cached_lines = (out / "predictions.jsonl").read_text().count("\n")
    started = time.monotonic()
    run_fidelity(out, llm_server)
    rerun = json.loads((out / "report.json").read_text())
    assert rerun["meta"]["requests"] == 0 and rerun["meta"]["cache_hits"] == 12
    assert (out / "predictions.jsonl").read_text().count("\n") == cached_lines == 10
    assert rerun["systems"] == systems
    assert time.monotonic() - started < 60


@pytest.mark.llm
def test_untagged_replies_score_on_content_and_a_limit_stops_reading(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    # SmolLM2-135M answers with an `**Environment Observation:**` screen and no tags. The public
    # evaluator scores that screen; so does the report, with format validity 0. The recording's later
    # shards are corrupt: with --limit-trajectories 1 the command never reads them.
    real, _ = dataset_with_corrupt_tail(tmp_path / "rec")
    argv = [sys.executable, "-m", "training.fidelity", "--real", str(real), "--model", llm_server.base_url]
    argv += ["--out", str(tmp_path / "report"), "--limit-trajectories", "1", "--max-turns", "2"]
    argv += ["--replays", "0", "--no-closed-loop", "--base", "none", "--max-new-tokens", "48"]
    argv += ["--context-chars", "3000", "--no-progress"]
    done = subprocess.run(argv, cwd=ROOT, env=OFFLINE, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    model = report["systems"]["model/teacher_forced"]["overall"]
    assert report["meta"]["trajectories"] == 1 and model["turns"] == 2
    assert model["tagged"] == 0.0 and model["format_valid"] == 0.0
    # The screens are plausible, not right: well above nothing, far below the real runs' ~0.97.
    assert 0.05 < model["edit_similarity"] < 0.9
    turns = [json.loads(line) for line in (tmp_path / "report" / "turns.jsonl").read_text().splitlines()]
    assert all(t["prediction"] and "Environment Observation" not in t["prediction"] for t in turns)
    # No ceiling, said plainly: in the notes, on the console and at the top of the page.
    assert "real_vs_real" not in report["systems"] and report["headline"]["terminal"]["ceiling"] is None
    assert report["notes"][0].startswith("No real-vs-real ceiling: --replays 0")
    assert any("never produced the <predicted_observation> format" in n for n in report["notes"])
    assert "no real-vs-real ceiling" in done.stdout.lower()
    html = (tmp_path / "report" / "report.html").read_text()
    assert html.index("No real-vs-real ceiling") < html.index("<svg")


def test_cli_errors_say_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--real", str(tmp_path / "nothing"), "--model", "x", "--out", str(tmp_path / "o")]
    assert fidelity_main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot read --real" in err and "collectors.terminal" in err
    with pytest.raises(SystemExit) as helped:
        fidelity_main(["--help"])
    out = capsys.readouterr().out
    assert helped.value.code == 0 and "examples:" in out and "--replays" in out
    assert "--compare NAME=SPEC" in out and "base.json" in out

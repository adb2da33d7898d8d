"""`python -m training.fidelity agents` end to end: REAL terminal collector runs in bubblewrap sandboxes
against the same collector on the simulator, whose world model is a REAL llama.cpp server
(SmolLM2-135M); the report's numbers are checked against the two datasets the runs wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from schemas import read_trajectories
from tests.llm_server import LLMServer
from tests.training.conftest import OFFLINE, ROOT
from training.fidelity.agreement import cohens_kappa, verdict
from training.fidelity.episodes import action_key, pair_key

DEMO_TASKS = ROOT / "collectors" / "terminal" / "tasks.jsonl"
# Two of the demo suite's tasks whose end state a `command` verifier checks (1 and 2 checks): each
# simulated episode costs the CPU-bound world model a request per step and per check.
TASKS = ("files-create-notes", "files-rename")
pytestmark = [pytest.mark.llm, pytest.mark.bwrap, pytest.mark.tmux]


def task_file(tmp_path: Path, ids: tuple[str, ...]) -> tuple[Path, dict[str, dict]]:
    lines = [json.loads(line) for line in DEMO_TASKS.read_text().splitlines() if line.strip()]
    chosen = {t["id"]: t for t in lines if t["id"] in ids}
    assert sorted(chosen) == sorted(ids)
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(chosen[i]) + "\n" for i in ids))
    return path, chosen


def run_agents(out: Path, server: LLMServer, tasks: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "training.fidelity", "agents", "--tasks", str(tasks), "--backend", "bwrap"]
    argv += ["--model-endpoint", server.base_url, "--model-max-tokens", "48", "--out", str(out), *extra]
    done = subprocess.run(argv, cwd=ROOT, env=OFFLINE, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def consistent_with_the_datasets(out: Path, tasks: dict[str, dict], max_steps: int) -> dict:
    """Every number of the report recomputed from OUT/real and OUT/sim; returns the report."""
    report = json.loads((out / "report.json").read_text())
    real = {pair_key(t): t for t in read_trajectories(str(out / "real"))}
    sim = {pair_key(t): t for t in read_trajectories(str(out / "sim"))}
    assert real.keys() == sim.keys() and len(real) == len(tasks)
    for key, t in real.items():
        assert t.environment.backend == "bwrap" and not t.provenance.simulated
        assert t.outcome.verification.verifier == "command"
        s = sim[key]
        assert s.environment.backend == "simulator" and s.provenance.simulated
        v = s.outcome.verification
        assert v.verifier == "simulated:command"
        # one aside turn per check, none of them recorded as a step
        assert v.details["total"] == len(tasks[key[1]]["verifier"]["checks"]) and len(s.steps) <= max_steps
        assert (s.outcome.reward is None) == (v.details["decided"] == 0)
    d = report["domains"]["terminal"]
    assert d["pairs"] == len(tasks) and d["real_only"] == d["sim_only"] == []
    verdicts = [(verdict(real[k].outcome.reward, 1.0), verdict(sim[k].outcome.reward, 1.0)) for k in real]
    for (a, b), n in Counter(verdicts).items():
        assert d["reward"]["confusion"][a][b] == n
    assert sum(n for row in d["reward"]["confusion"].values() for n in row.values()) == len(tasks)
    assert d["reward"]["kappa"] == cohens_kappa(verdicts).as_dict()
    assert d["steps"]["real_mean"] == pytest.approx(sum(len(t.steps) for t in real.values()) / len(real))
    assert d["steps"]["sim_mean"] == pytest.approx(sum(len(t.steps) for t in sim.values()) / len(sim))
    rows = {(r["task_id"], r["slot"]): r for r in report["episodes"]}
    for key, t in real.items():
        div = rows[key[1:]]["divergence"]
        same = [
            action_key(a.action) == action_key(b.action)
            for a, b in zip(t.steps, sim[key].steps, strict=False)
        ]
        first_other = same.index(False) + 1 if False in same else None
        if len(t.steps) != len(sim[key].steps) and first_other is None:
            first_other = min(len(t.steps), len(sim[key].steps)) + 1
        assert div["action_turn"] == first_other
        assert div["turn"] is None or div["turn"] <= (first_other or max_steps)
        assert all(0.0 <= score <= 1.0 for score in div["scores"])
    assert sum(d["divergence"]["by_kind"].values()) == len(tasks)
    assert "## terminal" in (out / "report.md").read_text() and (out / "report.html").is_file()
    return report


def test_scripted_policy_real_vs_simulated(tmp_path: Path, llm_server: LLMServer) -> None:
    tasks, chosen = task_file(tmp_path, TASKS)
    out = tmp_path / "scripted"
    done = run_agents(out, llm_server, tasks, "--policy", "scripted", "--max-steps", "4")
    assert "terminal: 2 paired episodes" in done.stdout and "report:" in done.stdout
    report = consistent_with_the_datasets(out, chosen, 4)
    d = report["domains"]["terminal"]
    # the scripted solutions solve every task for real, and play the same actions on the simulator
    assert sum(d["reward"]["confusion"]["success"].values()) == 2
    assert d["steps"]["equal"] == 2 and d["steps"]["difference"]["difference"] == 0.0
    assert d["divergence"]["by_kind"]["action"] == 0 and report["meta"]["policy"] == ["scripted"]
    assert report["meta"]["simulator"]["model"] == llm_server.model
    # a rerun with the same --out resumes: no episode is recorded again, and the report is the same
    asked = llm_server.chat_requests()
    again = run_agents(out, llm_server, tasks, "--policy", "scripted", "--max-steps", "4")
    assert "terminal: 2 paired episodes" in again.stdout and llm_server.chat_requests() == asked
    assert json.loads((out / "report.json").read_text())["episodes"] == report["episodes"]


def test_explorer_policy_real_vs_simulated(tmp_path: Path, llm_server: LLMServer) -> None:
    tasks, chosen = task_file(tmp_path, TASKS)
    out = tmp_path / "explorer"
    run_agents(out, llm_server, tasks, "--policy", "explorer", "--max-steps", "2", "--seed", "3")
    report = consistent_with_the_datasets(out, chosen, 2)
    assert report["meta"]["policy"] == ["explorer"]


def test_llm_policy_real_vs_simulated(tmp_path: Path, llm_server: LLMServer) -> None:
    tasks, chosen = task_file(tmp_path, ("files-create-notes",))
    out = tmp_path / "llm"
    agent = ["--llm-base-url", llm_server.base_url, "--llm-model", llm_server.model, "--llm-max-tokens", "48"]
    run_agents(out, llm_server, tasks, "--policy", "llm", *agent, "--max-steps", "1")
    report = consistent_with_the_datasets(out, chosen, 1)
    assert report["meta"]["policy"] == ["llm"]

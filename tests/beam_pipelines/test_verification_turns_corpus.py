"""Verification turns in the corpus: trajectories the real terminal collector records on bwrap (their
checks in `outcome.verification.turns`) and the recorded fixture of schema version 1 (none) build
together with the real Beam runner; the checks are SFT samples by default and absent with
--no-verification-turns, and never steps: not in RL, not in AgentWorldBench, not in any turn count."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from schemas.chat_tokens import shared_tokenizer
from schemas.verification_turns import check_command
from tests.beam_pipelines.conftest import documents, write_dataset
from tests.collectors.conftest import run_collector, trajectories, write_tasks
from tests.collectors.test_terminal_verifiers import embedded
from tests.conftest import build_corpus_in_process

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]


@pytest.fixture(scope="module")
def built(recorded, tmp_path_factory) -> tuple[list, Path, Path]:
    for tool in ("bwrap", "tmux"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (apt-get install {tool})")
    root = tmp_path_factory.mktemp("checks")
    tasks = write_tasks(root / "tasks.jsonl", [embedded("files-mkdir-tree"), embedded("files-rename")])
    done = run_collector(
        "--tasks", str(tasks), "--policy", "scripted", "--backend", "bwrap", "--out", str(root / "raw")
    )
    assert done.returncode == 0, done.stderr[-3000:]
    checked = trajectories(root / "raw")
    raw = write_dataset(root / "dataset", [*checked, *recorded])
    args = ["--input", f"{raw}/**/*.parquet", "--split-ratios", "1,0,0", "--min-test-per-domain", "0"]
    build_corpus_in_process(*args, "--output", str(root / "on"))
    build_corpus_in_process(*args, "--output", str(root / "off"), "--no-verification-turns")
    return checked, root / "on", root / "off"


def test_the_collector_records_the_checks_outside_the_steps(built) -> None:
    checked, _, _ = built
    by_task = {t.task.id: t for t in checked}
    tree = by_task["files-mkdir-tree"]
    assert len(tree.steps) == 2 and tree.outcome.reward == 1.0
    turns = tree.outcome.verification.turns
    checks = ["test -d tool/src", "test -d tool/tests", "test -d tool/docs"]
    assert [t.action.text for t in turns] == [check_command(c) for c in checks]
    assert [t.index for t in turns] == [2, 3, 4]
    assert all(t.observation.text.endswith(f"{t.action.text}\nPASS\nagent@sandbox:~$") for t in turns)


def test_checks_are_sft_samples_by_default_and_absent_with_the_flag_off(built) -> None:
    checked, on, off = built
    sft_on, sft_off = documents(on, "sft"), documents(off, "sft")
    tok = shared_tokenizer(None).tokenizer
    for t in checked:
        n, k = len(t.steps), len(t.outcome.verification.turns)
        steps = {f"{t.trajectory_id}:{i}" for i in range(1, n + 1)}
        checks = {f"{t.trajectory_id}:{i}" for i in range(n + 1, n + k + 1)}
        assert k > 0 and steps <= set(sft_on) and checks <= set(sft_on)
        assert steps <= set(sft_off) and not checks & set(sft_off)
        last = tok.decode(sft_on[f"{t.trajectory_id}:{n + k}"][0])
        turn = t.outcome.verification.turns[-1]
        assert f"### Turn {n + k}\n\n**Action:**\n{turn.action.text}" in last
        assert f"{turn.action.text}\nPASS\nagent@sandbox:~$\n</predicted_observation>" in last
    assert json.loads((on / "manifest.json").read_text())["config"]["verification_turns"] is True
    assert json.loads((off / "manifest.json").read_text())["config"]["verification_turns"] is False


def test_checks_are_never_steps_and_old_files_build_unchanged(built, recorded) -> None:
    checked, on, off = built
    steps = {t.trajectory_id: len(t.steps) for t in [*checked, *recorded]}
    for root in (on, off):
        rl = [json.loads(line) for f in (root / "rl").rglob("*.jsonl") for line in f.read_text().splitlines()]
        assert {r["trajectory_id"] for r in rl} == set(steps)
        assert all(r["total_turns"] == steps[r["trajectory_id"]] for r in rl)
        assert len(rl) == sum(steps.values())
    # the fixture's trajectories (no verification turns) give the same SFT documents either way
    sft_on, sft_off = documents(on, "sft"), documents(off, "sft")
    for t in recorded:
        ids = {d for d in sft_on if d.rsplit(":", 1)[0] == t.trajectory_id}
        assert len(ids) == len(t.steps) and {d: sft_on[d] for d in ids} == {d: sft_off[d] for d in ids}

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.training.conftest import TERMINAL_RUN
from training.fidelity.__main__ import first_per_domain, main, with_steps
from training.fidelity.held_out import held_out_ids


def test_held_out_keeps_only_the_corpus_test_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [t.trajectory_id for t in with_steps(str(TERMINAL_RUN))]
    bench = tmp_path / "corpus" / "agentworldbench"
    bench.mkdir(parents=True)
    records = [{"task": "terminal", "id": f"{ids[1]}:{k}"} for k in (1, 2)] + [{"id": f"{ids[3]}:1"}]
    (bench / "terminal_test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (bench / "terminal_train.jsonl").write_text(json.dumps({"id": f"{ids[0]}:1"}) + "\n")

    held = held_out_ids(str(tmp_path / "corpus"))
    assert held == {ids[1], ids[3]}
    assert [t.trajectory_id for t in with_steps(str(TERMINAL_RUN), only=held)] == [ids[1], ids[3]]

    argv = ["--real", str(TERMINAL_RUN), "--model", "qwen3-tiny", "--out", str(tmp_path / "rep")]
    assert main([*argv, "--held-out", str(tmp_path)]) == 2
    assert "no agentworldbench/*_test.jsonl" in capsys.readouterr().err


def test_the_per_domain_cap_keeps_the_first_of_each_domain_across_files_and_lists() -> None:
    every = list(with_steps(str(TERMINAL_RUN)))
    assert len(every) == 12 and len({t.trajectory_id for t in every}) == 12
    assert [t.trajectory_id for t in with_steps(str(TERMINAL_RUN), 3)] == [t.trajectory_id for t in every[:3]]
    mixed = [every[0], replace(every[1], domain="swe"), every[2], every[3], replace(every[4], domain="swe")]
    kept = [(t.domain, t.trajectory_id) for t in first_per_domain(mixed, 2)]
    assert kept == [(t.domain, t.trajectory_id) for t in mixed[:3] + mixed[4:]]
    assert list(first_per_domain(mixed, None)) == mixed

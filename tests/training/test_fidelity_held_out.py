from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.conftest import TERMINAL_RUN
from training.fidelity.__main__ import main, with_steps
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

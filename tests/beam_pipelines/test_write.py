from __future__ import annotations

import json

import apache_beam as beam
import numpy as np
import pytest
from datasets import load_dataset

from beam_pipelines.stages.common import TokenisedDoc
from beam_pipelines.stages.pack import Packer
from beam_pipelines.stages.write import LinesFile, TokenFile, WriteJsonLines, WriteManifest, length_histogram
from tests.beam_pipelines.conftest import pipeline


def _docs() -> list[TokenisedDoc]:
    return [
        TokenisedDoc("sft", split, "terminal", f"t{i}:1", np.full(10 + i, i, "<i4").tobytes(), 4, i == 3)
        for i, split in enumerate(["train"] * 8 + ["test"] * 2)
    ]


def test_token_shards_load_with_datasets_and_the_manifest_counts_them(tmp_path):
    stats = []
    for split in ("train", "test"):
        relative = f"sft/{split}/terminal-00000-of-00001.parquet"
        file = TokenFile(str(tmp_path), relative, ("sft", split, "terminal", 0, 1))
        packer = Packer(file.write, 64, window=3)
        for d in _docs():
            if d.split == split:
                packer.add(d)
        packer.flush()
        stats.append(file.close())
    with pipeline() as p:
        _ = p | beam.Create(stats) | WriteManifest(str(tmp_path), {"seq_len": 64})
    files = sorted(str(f) for f in (tmp_path / "sft").rglob("*.parquet"))
    rows = load_dataset("parquet", data_files=files, split="train")
    assert set(rows.column_names) == {"input_ids", "loss_mask", "doc_lengths", "doc_ids", "doc_echo"}
    assert sum(sum(r) for r in rows["doc_lengths"]) == sum(10 + i for i in range(10))
    assert sum(sum(m) for m in rows["loss_mask"]) == sum(10 + i - 4 for i in range(10))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["config"] == {"seq_len": 64}
    assert manifest["totals"]["sft"]["test/terminal"]["documents"] == 2
    assert manifest["totals"]["sft"]["train/terminal"]["tokens"] == sum(10 + i for i in range(8))
    assert manifest["length_histogram"]["sft"] == {"<=16": 7, "<=32": 3}
    assert not list(tmp_path.rglob("*.tmp-*"))


def test_answer_lengths_count_the_final_answer_not_the_trained_history(tmp_path):
    file = TokenFile(
        str(tmp_path), "sft/train/terminal-00000-of-00001.parquet", ("sft", "train", "terminal", 0, 1)
    )
    packer = Packer(file.write, 64, window=3)
    ids = np.arange(30, dtype="<i4").tobytes()
    packer.add(TokenisedDoc("sft", "train", "terminal", "a:3", ids, 24, False, ((3, 9), (12, 20))))
    packer.add(TokenisedDoc("sft", "train", "terminal", "b:1", ids[:40], 4, False))
    packer.flush()
    stats = file.close()
    assert stats["loss_tokens"] == 6 + 8 + 6 + 6
    assert stats["target_tokens"] == {6: 2}


def test_a_file_appears_only_when_complete(tmp_path):
    lines = LinesFile(str(tmp_path), "rl/train/terminal.jsonl")
    lines.write([{"id": "t:1"}])
    assert not (tmp_path / "rl/train/terminal.jsonl").exists()
    assert lines.close()["documents"] == 1
    assert (tmp_path / "rl/train/terminal.jsonl").read_text() == '{"id": "t:1"}\n'
    failed = LinesFile(str(tmp_path), "rl/train/other.jsonl")
    failed.write([{"id": "u:1"}])
    failed.held.abort(RuntimeError("worker lost"))
    assert sorted(p.name for p in (tmp_path / "rl/train").iterdir()) == ["terminal.jsonl"]


def test_json_lines_are_written_sorted_by_trajectory_and_turn(tmp_path):
    records = [
        ("rl/train/terminal.jsonl", {"id": f"t:{k}", "trajectory_id": "t", "turn_idx": k}) for k in (10, 2, 1)
    ]
    with pipeline() as p:
        _ = p | beam.Create(records) | WriteJsonLines(str(tmp_path))
    lines = (tmp_path / "rl/train/terminal.jsonl").read_text().splitlines()
    assert [json.loads(x)["turn_idx"] for x in lines] == [1, 2, 10]


@pytest.mark.parametrize(
    ("lengths", "expected"),
    [([1, 2, 3, 4, 5, 4096], {"<=1": 1, "<=2": 1, "<=4": 2, "<=8": 1, "<=4096": 1}), ([], {})],
)
def test_length_histogram(lengths, expected):
    assert length_histogram(np.array(lengths, dtype=np.int64)) == expected

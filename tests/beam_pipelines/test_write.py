from __future__ import annotations

import json

import apache_beam as beam
import numpy as np
from apache_beam.testing.util import assert_that, equal_to
from datasets import load_dataset

from beam_pipelines.stages.pack import Pack
from beam_pipelines.stages.tokenise import TokenisedDoc
from beam_pipelines.stages.write import WriteJsonLines, WriteManifest, WriteTokenShards, length_histogram
from tests.beam_pipelines.conftest import pipeline


def _docs() -> list[TokenisedDoc]:
    return [
        TokenisedDoc("sft", split, "terminal", f"t{i}:1", np.full(10 + i, i, "<i4").tobytes(), 4, i == 3)
        for i, split in enumerate(["train"] * 8 + ["test"] * 2)
    ]


def test_token_shards_load_with_datasets_and_the_manifest_counts_them(tmp_path):
    docs = _docs()
    with pipeline() as p:
        stats = p | beam.Create([docs]) | Pack(seq_len=64, shards=2) | WriteTokenShards(str(tmp_path))
        paths = stats | beam.Map(lambda s: s["path"])
        assert_that(
            paths,
            equal_to(
                [
                    "sft/train/terminal-00000-of-00002.parquet",
                    "sft/train/terminal-00001-of-00002.parquet",
                    "sft/test/terminal-00000-of-00001.parquet",
                ]
            ),
        )
        _ = stats | WriteManifest(str(tmp_path), {"seq_len": 64})
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


def test_json_lines_are_written_sorted_by_trajectory_and_turn(tmp_path):
    records = [
        ("rl/train/terminal.jsonl", {"id": f"t:{k}", "trajectory_id": "t", "turn_idx": k}) for k in (10, 2, 1)
    ]
    with pipeline() as p:
        _ = p | beam.Create(records) | WriteJsonLines(str(tmp_path))
    lines = (tmp_path / "rl/train/terminal.jsonl").read_text().splitlines()
    assert [json.loads(x)["turn_idx"] for x in lines] == [1, 2, 10]


def test_length_histogram():
    assert length_histogram(np.array([1, 2, 3, 4, 5, 4096])) == {
        "<=1": 1,
        "<=2": 1,
        "<=4": 2,
        "<=8": 1,
        "<=4096": 1,
    }

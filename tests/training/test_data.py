from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.training.conftest import SHARD_SCHEMA, counting_corpus, write_rows
from training.data import IGNORE_INDEX, PackedDataset, collate, find_shards


def test_collate_shifts_labels_masks_and_restarts_positions() -> None:
    # one row: doc A (5 tokens, loss from index 2), doc B (3 tokens, echo, loss on all); one shorter row
    row = {
        "input_ids": torch.tensor([10, 11, 12, 13, 14, 20, 21, 22], dtype=torch.int32),
        "loss_mask": torch.tensor([0, 0, 1, 1, 1, 1, 1, 1], dtype=torch.int8),
        "doc_lengths": torch.tensor([5, 3], dtype=torch.int32),
        "doc_echo": torch.tensor([False, True]),
    }
    short = {
        "input_ids": torch.tensor([30, 31, 32], dtype=torch.int32),
        "loss_mask": torch.tensor([1, 1, 1], dtype=torch.int8),
        "doc_lengths": torch.tensor([3], dtype=torch.int32),
        "doc_echo": torch.tensor([False]),
    }
    b = collate([row, short], echo_weight=0.25)
    x = IGNORE_INDEX
    assert b.input_ids.shape == (2, 8) and b.tokens == 11
    # position t predicts token t+1; token 12 (first trained) is predicted from position 1
    assert b.labels[0].tolist() == [x, 12, 13, 14, x, 21, 22, x]  # doc end predicts nothing
    assert b.loss_weight[0].tolist() == [0, 1, 1, 1, 0, 0.25, 0.25, 0]
    assert b.position_ids[0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2]
    assert b.labels[1].tolist() == [31, 32, x, x, x, x, x, x]
    assert b.loss_weight[1].tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    # the padding is its own sequence of positions, so it never attends to real tokens
    assert b.position_ids[1].tolist() == [0, 1, 2, 0, 1, 2, 3, 4]
    assert (b.labels == IGNORE_INDEX).eq(b.loss_weight == 0).all()


def test_test_shards_have_the_pipeline_schema() -> None:
    pytest.importorskip("apache_beam")
    from beam_pipelines.stages.pack import ROW_SCHEMA

    assert SHARD_SCHEMA.equals(ROW_SCHEMA)


def test_rows_round_trip_from_parquet(tmp_path: Path) -> None:
    write_rows(
        tmp_path / "sft" / "train" / "a.parquet",
        [[([1, 2, 3], 1, False), ([4, 5], 0, True)], [([6, 7, 8, 9], 2, False)]],
    )
    ds = PackedDataset(str(tmp_path / "sft"))
    assert len(ds) == 2 and ds.tokens == 9
    r0 = ds.row(0)
    assert r0["input_ids"].tolist() == [1, 2, 3, 4, 5]
    assert r0["loss_mask"].tolist() == [0, 1, 1, 1, 1]
    assert r0["doc_lengths"].tolist() == [3, 2] and r0["doc_echo"].tolist() == [False, True]
    assert ds.row(1)["loss_mask"].tolist() == [0, 0, 1, 1]


def test_ranks_are_disjoint_and_cover_every_row_each_epoch(tmp_path: Path) -> None:
    root = counting_corpus(tmp_path, rows=11)
    for epoch in (0, 1):
        seen: list[int] = []
        for rank in range(3):
            ds = PackedDataset(str(root / "sft"), rank=rank, world_size=3, seed=5)
            ds.seek({"epoch": epoch, "offset": 0})
            seen += [int(r["input_ids"][0]) for r in ds]
        assert len(seen) == 11 and len(set(seen)) == 11  # disjoint and covering


def test_shuffle_is_deterministic_per_seed_and_epoch(tmp_path: Path) -> None:
    root = str(counting_corpus(tmp_path, rows=16) / "sft")
    a, b, c = PackedDataset(root, seed=1), PackedDataset(root, seed=1), PackedDataset(root, seed=2)
    assert a.order(0).tolist() == b.order(0).tolist()
    assert a.order(0).tolist() != a.order(1).tolist()
    assert a.order(0).tolist() != c.order(0).tolist()
    assert sorted(a.order(3).tolist()) == list(range(16))


def test_seek_resumes_the_same_stream_across_epochs(tmp_path: Path) -> None:
    root = str(counting_corpus(tmp_path, rows=5) / "sft")
    ds = PackedDataset(root, seed=3)
    stream = ds.batches(batch_size=2, echo_weight=0.1)
    first = [next(stream) for _ in range(4)]  # 8 rows: crosses into the second epoch
    position = ds.position()
    expected = [next(stream).input_ids for _ in range(3)]
    again = PackedDataset(root, seed=3)
    again.seek(position)
    resumed = again.batches(batch_size=2, echo_weight=0.1)
    assert position == {"epoch": 1, "offset": 3} and len(first) == 4
    for want in expected:
        assert torch.equal(next(resumed).input_ids, want)


def test_missing_split_says_what_to_pass(tmp_path: Path) -> None:
    counting_corpus(tmp_path)
    assert find_shards(str(tmp_path / "sft"), "validation") == []
    assert find_shards(str(tmp_path / "sft" / "train"), "validation") == []  # train files are not validation
    assert find_shards(str(tmp_path / "sft" / "train"), "train") == find_shards(str(tmp_path / "sft"))
    with pytest.raises(FileNotFoundError, match="build_corpus"):
        PackedDataset(str(tmp_path / "sft"), split="validation")


def test_pipeline_corpus_rows_follow_the_pack_contract(pipeline_corpus: Path) -> None:
    ds = PackedDataset(str(pipeline_corpus / "cpt"), "train")
    assert len(ds) > 10
    for i in range(len(ds)):
        r = ds.row(i)
        assert int(r["doc_lengths"].sum()) == len(r["input_ids"]) <= 256
    b = collate([ds.row(i) for i in range(4)])
    # CPT trains every token but a document's last: one untrained position per document
    docs = sum(len(ds.row(i)["doc_lengths"]) for i in range(4))
    assert int((b.loss_weight > 0).sum()) == b.tokens - docs

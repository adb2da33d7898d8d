from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from tests.training.conftest import ROOT, SHARD_SCHEMA, counting_corpus, write_rows
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


def _rows_by_reading_everything(files: list[str]) -> list[dict[str, list]]:
    """The reference: every shard read whole and concatenated, as the loader once did."""
    table = pa.concat_tables(
        pq.read_table(f, columns=["input_ids", "loss_mask", "doc_lengths", "doc_echo"]) for f in files
    )
    return table.to_pylist()


def test_mapped_shards_give_the_rows_and_batches_of_the_whole_split(tmp_path: Path) -> None:
    # Several shards, several row groups each, and an empty shard: the global row order must not change.
    rows = [[(list(range(100 * r, 100 * r + 5 + r % 7)), r % 3, r % 2 == 0)] for r in range(23)]
    for n, (a, b) in enumerate(((0, 9), (9, 9), (9, 23))):
        path = tmp_path / "sft" / "train" / f"part-{n}.parquet"
        write_rows(path, rows[a:b])
        pq.write_table(pq.read_table(path), path, row_group_size=4)
    cache = tmp_path / "cache"
    ds = PackedDataset(str(tmp_path / "sft"), seed=7, cache_dir=cache)
    expected = _rows_by_reading_everything(ds.files)
    assert len(ds) == 23 and ds.tokens == sum(len(r["input_ids"]) for r in expected)
    for i, want in enumerate(expected):
        got = ds.row(i)
        assert {k: v.tolist() for k, v in got.items()} == want
        assert (got["input_ids"].dtype, got["doc_lengths"].dtype) == (torch.int32, torch.int64)
    # Ranks deal the same permutation; each rank's batches are collated from exactly its rows.
    for rank in range(2):
        ranked = PackedDataset(str(tmp_path / "sft"), rank=rank, world_size=2, seed=7, cache_dir=cache)
        batch = next(ranked.batches(batch_size=3, echo_weight=0.5))
        order = ranked.order(0)[:3]
        reference = collate([{k: torch.tensor(expected[i][k]) for k in expected[i]} for i in order], 0.5)
        assert torch.equal(batch.input_ids, reference.input_ids) and torch.equal(
            batch.labels, reference.labels
        )
        assert torch.equal(batch.loss_weight, reference.loss_weight)
    assert len(list(cache.glob("*.arrow"))) == 3  # converted once, mapped by every dataset after


def test_a_rewritten_shard_is_converted_again(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "sft" / "train" / "a.parquet", [[([1, 2, 3], 0, False)]])
    assert PackedDataset(str(tmp_path / "sft"), cache_dir=tmp_path / "c").row(0)["input_ids"].tolist() == [
        1,
        2,
        3,
    ]
    write_rows(path, [[([4, 5], 0, False)], [([6], 0, True)]])
    again = PackedDataset(str(tmp_path / "sft"), cache_dir=tmp_path / "c")
    assert len(again) == 2 and again.row(0)["input_ids"].tolist() == [4, 5]


MEMORY_PROBE = """
import sys
import pyarrow as pa
from training.data import PackedDataset

def anon_kib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1])

pa.array([1]).to_numpy()  # pyarrow's first conversion imports pandas: not the data's memory
before = anon_kib()
ds = PackedDataset(sys.argv[1], cache_dir=sys.argv[2], world_size=2)
tokens = sum(len(r["input_ids"]) for r in ds)  # one rank's whole epoch
print(tokens, ds.tokens, anon_kib() - before)
"""


def test_the_loader_maps_the_split_instead_of_loading_it(tmp_path: Path) -> None:
    # 6000 rows of 4096 tokens: 123 MB of ids and masks once decoded. Converting the shard and reading
    # a whole epoch must leave the process's anonymous memory (where a copy of the split would live)
    # far below that: the mapped file's pages are the page cache's, shared by the ranks.
    rows, width = 6000, 4096
    offsets = pa.array(np.arange(0, rows * width + 1, width, dtype=np.int32))
    table = pa.table(
        {
            "input_ids": pa.ListArray.from_arrays(
                offsets, pa.array(np.arange(rows * width, dtype=np.int32) % 50_000)
            ),
            "loss_mask": pa.ListArray.from_arrays(offsets, pa.array(np.ones(rows * width, dtype=np.int8))),
            "doc_lengths": pa.array([[width]] * rows, pa.list_(pa.int32())),
            "doc_ids": pa.array([["d"]] * rows, pa.list_(pa.string())),
            "doc_echo": pa.array([[False]] * rows, pa.list_(pa.bool_())),
        },
        schema=SHARD_SCHEMA,
    )
    shard = tmp_path / "sft" / "train" / "big.parquet"
    shard.parent.mkdir(parents=True)
    pq.write_table(table, shard, row_group_size=512, compression="zstd")
    del table
    argv = [sys.executable, "-c", MEMORY_PROBE, str(tmp_path / "sft"), str(tmp_path / "cache")]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rank_tokens, split_tokens, grown_kib = map(int, done.stdout.split())
    assert rank_tokens == split_tokens // 2 == rows // 2 * width
    assert grown_kib < 48 * 1024, (
        f"anonymous memory grew {grown_kib} KiB converting and reading a 123 MB split"
    )

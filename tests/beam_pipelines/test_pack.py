from __future__ import annotations

import random

import apache_beam as beam
import numpy as np
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.stages.pack import Pack, _KeyByShard, _PackShard, best_fit_decreasing
from beam_pipelines.stages.tokenise import TokenisedDoc
from tests.beam_pipelines.conftest import pipeline

SEQ = 100


def _doc(i: int, n: int, loss_start: int = 0, split: str = "train") -> TokenisedDoc:
    ids = np.arange(i * 1000, i * 1000 + n, dtype="<i4")
    return TokenisedDoc("cpt", split, "terminal", f"d{i:03d}", ids.tobytes(), loss_start, i % 2 == 0)


def test_best_fit_decreasing():
    lengths = [60, 50, 40, 30, 20, 10]
    bins = best_fit_decreasing(lengths, 100)
    assert sorted(sorted(b) for b in bins) == [[0, 2], [1, 3, 4], [5]]
    assert all(sum(lengths[i] for i in b) <= 100 for b in bins)


def _rows(tables):
    rows = []
    for _key, table in tables:
        rows += table.to_pylist()
    return rows


def test_pack_keeps_every_token_and_boundary():
    rng = random.Random(0)
    docs = [_doc(i, rng.randint(1, 90), loss_start=rng.randint(0, 1)) for i in range(60)] + [
        _doc(99, 250, 120)
    ]
    with pipeline() as p:
        tables = p | beam.Create([docs[:30], docs[30:]]) | Pack(seq_len=SEQ, shards=2)

        def check(tables):
            rows = _rows(tables)
            assert all(len(r["input_ids"]) <= SEQ for r in rows)
            assert all(sum(r["doc_lengths"]) == len(r["input_ids"]) == len(r["loss_mask"]) for r in rows)
            pieces = {}
            for r in rows:
                at = 0
                for doc_id, n in zip(r["doc_ids"], r["doc_lengths"], strict=True):
                    pieces[doc_id] = (r["input_ids"][at : at + n], r["loss_mask"][at : at + n])
                    at += n
            for d in docs[:-1]:
                ids, mask = pieces[d.doc_id]
                assert ids == np.frombuffer(d.ids, "<i4").tolist()
                assert mask == [0] * d.loss_start + [1] * (len(ids) - d.loss_start)
            # the long document is cut into seq_len chunks; the loss starts inside the second chunk
            assert [len(pieces[f"d099@{n}"][0]) for n in range(3)] == [100, 100, 50]
            assert [sum(pieces[f"d099@{n}"][1]) for n in range(3)] == [0, 80, 50]
            # best fit fills rows: at most one row per shard and window is less than half full
            assert sum(sum(r["doc_lengths"]) < SEQ // 2 for r in rows) <= 2

        assert_that(tables, check)


def test_packing_does_not_depend_on_input_order_or_batching():
    docs = [_doc(i, 7 * i % 95 + 1) for i in range(40)]
    expected = [
        (key, table.to_pylist())
        for key, group in _KeyByShard(3).process(docs)
        for key, table in _PackShard(SEQ, 2048).process((key, [group]))
    ]
    shuffled = docs[:]
    random.Random(1).shuffle(shuffled)
    for batches in ([docs], [shuffled[:13], shuffled[13:]]):
        with pipeline() as p:
            tables = p | beam.Create(batches) | Pack(seq_len=SEQ, shards=3)
            assert_that(tables | beam.MapTuple(lambda key, t: (key, t.to_pylist())), equal_to(expected))

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from beam_pipelines.stages.common import TokenisedDoc
from beam_pipelines.stages.pack import Packer, best_fit_decreasing

SEQ = 100


def _doc(i: int, n: int, loss_start: int = 0, split: str = "train") -> TokenisedDoc:
    ids = np.arange(i * 1000, i * 1000 + n, dtype="<i4")
    return TokenisedDoc("cpt", split, "terminal", f"d{i:03d}", ids.tobytes(), loss_start, i % 2 == 0)


def _pack(docs: list[TokenisedDoc], window: int) -> list[dict]:
    tables: list[pa.Table] = []
    packer = Packer(tables.append, SEQ, window)
    for d in docs:
        packer.add(d)
    packer.flush()
    return [row for table in tables for row in table.to_pylist()]


def test_best_fit_decreasing():
    lengths = [60, 50, 40, 30, 20, 10]
    bins = best_fit_decreasing(lengths, 100)
    assert sorted(sorted(b) for b in bins) == [[0, 2], [1, 3, 4], [5]]
    assert all(sum(lengths[i] for i in b) <= 100 for b in bins)


def test_pack_keeps_every_token_and_boundary():
    rng = random.Random(0)
    docs = [_doc(i, rng.randint(1, 90), loss_start=rng.randint(0, 1)) for i in range(60)] + [
        _doc(99, 250, 120)
    ]
    rows = _pack(docs, window=31)
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
    # best fit fills rows: at most one row per window is less than half full
    assert sum(sum(r["doc_lengths"]) < SEQ // 2 for r in rows) <= 2


def test_history_spans_are_trained_and_cut_with_their_document():
    ids = np.arange(250, dtype="<i4").tobytes()
    doc = TokenisedDoc("sft", "train", "terminal", "h", ids, 200, False, ((10, 20), (90, 130)))
    rows = _pack([doc, _doc(1, 30)], window=8)
    masks = {d: [] for d in ("h@0", "h@1", "h@2")}
    for r in rows:
        at = 0
        for doc_id, n in zip(r["doc_ids"], r["doc_lengths"], strict=True):
            if doc_id in masks:
                masks[doc_id] = r["loss_mask"][at : at + n]
            at += n
    whole = masks["h@0"] + masks["h@1"] + masks["h@2"]
    assert [i for i, x in enumerate(whole) if x] == [*range(10, 20), *range(90, 130), *range(200, 250)]


def test_packing_is_a_function_of_the_documents_in_order():
    docs = [_doc(i, 7 * i % 95 + 1) for i in range(40)]
    assert _pack(docs, 2048) == _pack(list(docs), 2048)
    # windows bound what is packed together: no row mixes documents of two windows
    for r in _pack(docs, 10):
        windows = {int(d[1:]) // 10 for d in r["doc_ids"]}
        assert len(windows) == 1

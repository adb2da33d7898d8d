"""Pack tokenised documents into rows of at most `seq_len` tokens, best-fit decreasing.

Determinism: which documents share a row must not depend on how a runner batched or ordered them, so
the shard builder (`beam_pipelines.stages.shards`) hands a `Packer` each output shard's documents in a
fixed order, and it packs them window by window (a bounded number of documents per window). A document
longer than `seq_len` is cut into `seq_len` chunks; every row keeps its documents' lengths so attention
can be restricted to each document (`cu_seqlens` = cumulative `doc_lengths`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from beam_pipelines import dead_letter
from beam_pipelines.stages.common import TokenisedDoc

STAGE = "pack"
WINDOW = 2048  # documents packed together: bounds memory and the best-fit search

ROW_SCHEMA = pa.schema(
    [
        ("input_ids", pa.list_(pa.int32())),
        ("loss_mask", pa.list_(pa.int8())),
        ("doc_lengths", pa.list_(pa.int32())),
        ("doc_ids", pa.list_(pa.string())),
        ("doc_echo", pa.list_(pa.bool_())),
    ]
)


def best_fit_decreasing(lengths: list[int], capacity: int) -> list[list[int]]:
    """Bins (lists of item indices) of total length <= capacity; every length must be <= capacity."""
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (room left, bin index), sorted: the best fit is the first that fits
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        at = bisect.bisect_left(free, (lengths[i], -1))
        if at == len(free):
            bins.append([i])
            room, b = capacity - lengths[i], len(bins) - 1
        else:
            room, b = free.pop(at)
            bins[b].append(i)
            room -= lengths[i]
        bisect.insort(free, (room, b))
    return bins


class _Piece:
    __slots__ = ("doc_id", "ids", "loss_start", "echo", "history_spans")

    def __init__(
        self, doc_id: str, ids: np.ndarray, loss_start: int, echo: bool, history_spans: tuple = ()
    ) -> None:
        self.doc_id, self.ids, self.loss_start, self.echo = doc_id, ids, loss_start, echo
        self.history_spans = history_spans


def _pieces(doc: TokenisedDoc, seq_len: int) -> list[_Piece]:
    ids = np.frombuffer(doc.ids, dtype="<i4")
    if len(ids) <= seq_len:
        return [_Piece(doc.doc_id, ids, doc.loss_start, doc.echo, doc.history_spans)]
    dead_letter.count(STAGE, "chunked_documents")

    def clipped(at: int) -> tuple[tuple[int, int], ...]:
        spans = ((max(a - at, 0), min(b - at, seq_len)) for a, b in doc.history_spans)
        return tuple((a, b) for a, b in spans if b > a)

    return [
        _Piece(
            f"{doc.doc_id}@{n}",
            ids[at : at + seq_len],
            min(max(doc.loss_start - at, 0), seq_len),
            doc.echo,
            clipped(at),
        )
        for n, at in enumerate(range(0, len(ids), seq_len))
    ]


def rows_table(rows: list[list[_Piece]]) -> pa.Table:
    """One Arrow table from packed rows, built from flat arrays (no per-token Python objects)."""
    pieces = [p for row in rows for p in row]
    lengths = np.array([len(p.ids) for p in pieces], dtype=np.int64)
    ids = np.concatenate([p.ids for p in pieces]) if pieces else np.zeros(0, np.int32)
    mask = np.zeros(len(ids), dtype=np.int8)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for p, start, end in zip(pieces, starts[:-1], starts[1:], strict=True):
        mask[start + p.loss_start : end] = 1
        for a, b in p.history_spans:
            mask[start + a : start + b] = 1
    doc_offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int32)
    token_offsets = starts[doc_offsets].astype(np.int32)

    def listed(values: pa.Array, offsets: np.ndarray) -> pa.Array:
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)

    return pa.Table.from_arrays(
        [
            listed(pa.array(ids, pa.int32()), token_offsets),
            listed(pa.array(mask, pa.int8()), token_offsets),
            listed(pa.array(lengths.astype(np.int32)), doc_offsets),
            listed(pa.array([p.doc_id for p in pieces], pa.string()), doc_offsets),
            listed(pa.array([p.echo for p in pieces], pa.bool_()), doc_offsets),
        ],
        schema=ROW_SCHEMA,
    )


class Packer:
    """Packs documents window by window into rows and hands each window's rows to `sink` as a table."""

    def __init__(self, sink: Callable[[pa.Table], None], seq_len: int, window: int = WINDOW) -> None:
        self._sink, self._seq_len, self._window = sink, seq_len, window
        self._docs: list[TokenisedDoc] = []

    def add(self, doc: TokenisedDoc) -> None:
        self._docs.append(doc)
        if len(self._docs) >= self._window:
            self.flush()

    def flush(self) -> None:
        if not self._docs:
            return
        pieces = [p for d in self._docs for p in _pieces(d, self._seq_len)]
        bins = best_fit_decreasing([len(p.ids) for p in pieces], self._seq_len)
        rows = [[pieces[i] for i in b] for b in bins]
        dead_letter.count(STAGE, "rows", len(rows))
        self._sink(rows_table(rows))
        self._docs = []

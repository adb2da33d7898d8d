"""Packed token shards from `beam_pipelines` as training batches.

A corpus is OUT/<corpus>/<split>/*.parquet; each row holds several documents (`doc_lengths`), a
`loss_mask` (1 = trained token) and `doc_echo` (the document is an echo turn). Rows are shuffled per
epoch from (seed, epoch) alone, then dealt to ranks (`order[rank::world_size]`), so every rank can
compute its own slice without communication and a resumed run sees the same order.

Label convention (pre-shifted): `labels[t]` is the token that position t must predict, i.e.
`input_ids[t + 1]`, so the loss is `cross_entropy(logits[t], labels[t])` with no further shift; do
not hand these labels to a Hugging Face model's own loss, which shifts again. The last token of each
document predicts nothing (-100): the next document is unrelated text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import IterableDataset

IGNORE_INDEX = -100
COLUMNS = ("input_ids", "loss_mask", "doc_lengths", "doc_echo")


def find_shards(paths_or_dir: str | Sequence[str], split: str = "train") -> list[str]:
    """Parquet files of one split: `DIR/<split>/*.parquet`, or `DIR/*.parquet` when DIR is named after the
    split (OUT/sft/train), or the given files/globs as they are."""
    if isinstance(paths_or_dir, str):
        fs, root = fsspec.core.url_to_fs(paths_or_dir)
        root = root.rstrip("/")
        found = fs.glob(f"{root}/{split}/*.parquet")
        if not found and root.rsplit("/", 1)[-1] == split:
            found = fs.glob(f"{root}/*.parquet")
        protocol = paths_or_dir.split("://")[0] + "://" if "://" in paths_or_dir else ""
        return sorted(protocol + f for f in found)
    out: list[str] = []
    for p in paths_or_dir:
        fs, pattern = fsspec.core.url_to_fs(p)
        protocol = p.split("://")[0] + "://" if "://" in p else ""
        out.extend(protocol + f for f in fs.glob(pattern))
    return sorted(out)


def _flat(table: pa.Table, name: str, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """A list column as (values, offsets) numpy arrays: no per-token Python objects."""
    column = table.column(name).combine_chunks()
    offsets = column.offsets.to_numpy().astype(np.int64)
    values = column.values.to_numpy(zero_copy_only=False).astype(dtype)
    return values[offsets[0] :], offsets - offsets[0]


class PackedDataset(IterableDataset):
    """Rows of packed shards, shuffled per epoch and sharded over ranks; iterating yields one epoch
    (this rank's slice) from the current position, as dicts of per-row tensors (see `collate`).

    `position` (epoch, rows of the slice already taken) is what a checkpoint records for exact resume.
    """

    def __init__(
        self,
        paths_or_dir: str | Sequence[str],
        split: str = "train",
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        shuffle: bool = True,
    ) -> None:
        self.files = find_shards(paths_or_dir, split)
        if not self.files:
            raise FileNotFoundError(
                f"no Parquet shards for split {split!r} under {paths_or_dir}: pass a corpus directory "
                "such as OUT/sft written by `python -m beam_pipelines.build_corpus`"
            )
        tables = []
        for path in self.files:
            with fsspec.open(path, "rb") as f:
                tables.append(pq.read_table(f, columns=list(COLUMNS)))
        table = pa.concat_tables(tables)
        self._ids, self._row_offsets = _flat(table, "input_ids", np.int32)  # int64 only per batch
        self._mask, _ = _flat(table, "loss_mask", np.int8)
        self._lengths, self._doc_offsets = _flat(table, "doc_lengths", np.int64)
        self._echo, _ = _flat(table, "doc_echo", np.bool_)
        self.rank, self.world_size, self.seed, self.shuffle = rank, world_size, seed, shuffle
        self.epoch, self.offset = 0, 0

    def __len__(self) -> int:
        """Rows in the whole split (all ranks)."""
        return len(self._row_offsets) - 1

    @property
    def tokens(self) -> int:
        return len(self._ids)

    def order(self, epoch: int) -> np.ndarray:
        """This rank's row indices for `epoch`."""
        rows = np.arange(len(self))
        if self.shuffle:
            rows = np.random.default_rng([self.seed, epoch]).permutation(len(self))
        return rows[self.rank :: self.world_size]

    def row(self, i: int) -> dict[str, torch.Tensor]:
        a, b = self._row_offsets[i], self._row_offsets[i + 1]
        c, d = self._doc_offsets[i], self._doc_offsets[i + 1]
        return {
            "input_ids": torch.from_numpy(self._ids[a:b]),
            "loss_mask": torch.from_numpy(self._mask[a:b]),
            "doc_lengths": torch.from_numpy(self._lengths[c:d]),
            "doc_echo": torch.from_numpy(self._echo[c:d]),
        }

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        order = self.order(self.epoch)
        while self.offset < len(order):
            # advance before yielding: a checkpoint taken after this row was consumed resumes past it
            self.offset += 1
            yield self.row(int(order[self.offset - 1]))

    def position(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset}

    def seek(self, position: dict[str, int]) -> None:
        self.epoch, self.offset = position["epoch"], position["offset"]

    def batches(self, batch_size: int, echo_weight: float) -> Iterator[Batch]:
        """Collated batches forever, epoch after epoch (a batch may span an epoch boundary)."""
        rows: list[dict[str, torch.Tensor]] = []
        while True:
            for row in self:
                rows.append(row)
                if len(rows) == batch_size:
                    yield collate(rows, echo_weight)
                    rows = []
            if len(self.order(self.epoch)) == 0:
                raise ValueError(
                    f"rank {self.rank} has no rows: {len(self)} rows for {self.world_size} ranks"
                )
            self.epoch, self.offset = self.epoch + 1, 0


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T) int64, padded with 0
    labels: torch.Tensor  # (B, T) int64: the next token, IGNORE_INDEX where nothing is trained
    position_ids: torch.Tensor  # (B, T) restarting at 0 at each document (and for the padding)
    loss_weight: torch.Tensor  # (B, T) float32: 0, echo_weight or 1 per predicted token
    tokens: int  # real (non-padding) tokens

    def to(self, device: torch.device | str) -> Batch:
        move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
        return Batch(
            move(self.input_ids),
            move(self.labels),
            move(self.position_ids),
            move(self.loss_weight),
            self.tokens,
        )


def collate(
    rows: list[dict[str, torch.Tensor]], echo_weight: float = 0.1, pad_to: int | None = None
) -> Batch:
    """Rows -> a padded batch. Position t is trained when token t+1 is in the same document and has
    loss_mask 1; its weight is `echo_weight` when that document is an echo turn, else 1."""
    width = max(pad_to or 0, max(len(r["input_ids"]) for r in rows))
    shape = (len(rows), width)
    input_ids = torch.zeros(shape, dtype=torch.long)
    labels = torch.full(shape, IGNORE_INDEX, dtype=torch.long)
    position_ids = torch.zeros(shape, dtype=torch.long)
    weight = torch.zeros(shape, dtype=torch.float32)
    for b, r in enumerate(rows):
        ids, n = r["input_ids"].long(), len(r["input_ids"])
        lengths = r["doc_lengths"].long()
        doc_of = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        starts = torch.cumsum(lengths, 0) - lengths
        input_ids[b, :n] = ids
        position_ids[b, :n] = torch.arange(n) - starts[doc_of]
        # padding is one more "document" so packed-sequence attention keeps it apart from real tokens
        position_ids[b, n:] = torch.arange(width - n)
        doc_weight = torch.where(r["doc_echo"], echo_weight, 1.0)
        same_doc = doc_of[1:] == doc_of[:-1]
        w = torch.where(same_doc & (r["loss_mask"][1:] == 1), doc_weight[doc_of[1:]], 0.0)
        weight[b, : n - 1] = w
        labels[b, : n - 1] = torch.where(w > 0, ids[1:], IGNORE_INDEX)
    return Batch(input_ids, labels, position_ids, weight, sum(len(r["input_ids"]) for r in rows))

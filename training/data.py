"""Packed token shards from `beam_pipelines` as training batches.

A corpus is OUT/<corpus>/<split>/*.parquet; each row holds several documents (`doc_lengths`), a
`loss_mask` (1 = trained token) and `doc_echo` (the document is an echo turn). Rows are shuffled per
epoch from (seed, epoch) alone, then dealt to ranks (`order[rank::world_size]`), so every rank can
compute its own slice without communication and a resumed run sees the same order.

Shards are not loaded into memory. Each Parquet shard is converted once, a row group at a time, into an
uncompressed Arrow IPC file in a local cache (`arrow_cache_dir()`), which every rank then memory-maps:
the rows a rank reads are paged in by the OS, shared between the ranks of a machine through the page
cache, and nothing else of the split is touched. The cache key is the shard's URL and fsspec's
`ukey` (size and modification time), so a rewritten shard is converted again; the cache is safe to
delete.

Label convention (pre-shifted): `labels[t]` is the token that position t must predict, i.e.
`input_ids[t + 1]`, so the loss is `cross_entropy(logits[t], labels[t])` with no further shift; do
not hand these labels to a Hugging Face model's own loss, which shifts again. The last token of each
document predicts nothing (-100): the next document is unrelated text.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import IterableDataset

from schemas.atomic import atomic_open

IGNORE_INDEX = -100
COLUMNS = ("input_ids", "loss_mask", "doc_lengths", "doc_echo")
CONVERT_BATCH_ROWS = 64


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


def arrow_cache_dir() -> Path:
    """Where shards are kept as memory-mappable Arrow files: $AGENTWORLD_CACHE_DIR, else the XDG cache."""
    if os.environ.get("AGENTWORLD_CACHE_DIR"):
        return Path(os.environ["AGENTWORLD_CACHE_DIR"]) / "arrow"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentworld" / "arrow"


def mapped_shard(url: str, cache_dir: Path) -> pa.Table:
    """The shard's COLUMNS as a table over a memory-mapped Arrow IPC file, converting it on first use.

    Ranks on one machine convert a shard once: the first takes a lock, the others wait for its file."""
    fs, path = fsspec.core.url_to_fs(url)
    key = hashlib.sha256(json.dumps([url, fs.ukey(path)]).encode()).hexdigest()[:32]
    target = cache_dir / f"{key}.arrow"
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            with fs.open(path, "rb") as source, atomic_open(str(target)) as out:
                shard = pq.ParquetFile(source)
                schema = shard.schema_arrow
                with pa.ipc.new_file(out, pa.schema([schema.field(c) for c in COLUMNS])) as writer:
                    # A few rows at a time: decoding a whole row group of lists costs several times its size.
                    for batch in shard.iter_batches(batch_size=CONVERT_BATCH_ROWS, columns=list(COLUMNS)):
                        writer.write_batch(batch)
            # The allocator keeps freed decode buffers for reuse; training has no use for them.
            pa.default_memory_pool().release_unused()
    return pa.ipc.open_file(pa.memory_map(str(target))).read_all()


@dataclass(frozen=True)
class _Chunk:
    """A run of rows of one shard: zero-copy numpy views of the memory-mapped buffers."""

    ids: np.ndarray
    ids_offsets: np.ndarray
    mask: np.ndarray
    lengths: np.ndarray
    doc_offsets: np.ndarray
    echo: pa.ListArray  # booleans are bit-packed in Arrow: unpacked per row


def _chunks(table: pa.Table) -> Iterator[_Chunk]:
    columns = [table.column(name).chunks for name in COLUMNS]
    for ids, mask, lengths, echo in zip(*columns, strict=True):
        if len(ids) == 0:
            continue
        yield _Chunk(
            ids=ids.values.to_numpy(),
            ids_offsets=ids.offsets.to_numpy(),
            mask=mask.values.to_numpy(),
            lengths=lengths.values.to_numpy(),
            doc_offsets=lengths.offsets.to_numpy(),
            echo=echo,
        )


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
        cache_dir: str | Path | None = None,
    ) -> None:
        self.files = find_shards(paths_or_dir, split)
        if not self.files:
            raise FileNotFoundError(
                f"no Parquet shards for split {split!r} under {paths_or_dir}: pass a corpus directory "
                "such as OUT/sft written by `python -m beam_pipelines.build_corpus`"
            )
        cache = Path(cache_dir) if cache_dir else arrow_cache_dir()
        self._chunks = [c for path in self.files for c in _chunks(mapped_shard(path, cache))]
        # Global row i lives in chunk k where _starts[k] <= i < _starts[k + 1].
        self._starts = np.cumsum([0] + [len(c.ids_offsets) - 1 for c in self._chunks])
        self.rank, self.world_size, self.seed, self.shuffle = rank, world_size, seed, shuffle
        self.epoch, self.offset = 0, 0

    def __len__(self) -> int:
        """Rows in the whole split (all ranks)."""
        return int(self._starts[-1])

    @property
    def tokens(self) -> int:
        return sum(int(c.ids_offsets[-1] - c.ids_offsets[0]) for c in self._chunks)

    def order(self, epoch: int) -> np.ndarray:
        """This rank's row indices for `epoch`."""
        rows = np.arange(len(self))
        if self.shuffle:
            rows = np.random.default_rng([self.seed, epoch]).permutation(len(self))
        return rows[self.rank :: self.world_size]

    def row(self, i: int) -> dict[str, torch.Tensor]:
        """Row `i` of the split; only its bytes are read, copied out of the mapped file."""
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        chunk, r = self._chunks[k], i - int(self._starts[k])
        a, b = chunk.ids_offsets[r], chunk.ids_offsets[r + 1]
        c, d = chunk.doc_offsets[r], chunk.doc_offsets[r + 1]
        echo = chunk.echo.values.slice(c, d - c).to_numpy(zero_copy_only=False)
        return {
            "input_ids": torch.from_numpy(chunk.ids[a:b].astype(np.int32)),  # int64 only per batch
            "loss_mask": torch.from_numpy(chunk.mask[a:b].astype(np.int8)),
            "doc_lengths": torch.from_numpy(chunk.lengths[c:d].astype(np.int64)),
            "doc_echo": torch.from_numpy(echo.astype(np.bool_)),
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

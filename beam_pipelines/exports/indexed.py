"""Our own writer of Megatron-LM's indexed dataset (a `.bin` of tokens plus an "MMIDIDX" `.idx`).

The format, as megatron-core's reader (`megatron/core/datasets/indexed_dataset.py`, `_IndexReader` and
`IndexedDataset`, megatron-core 0.16.1; https://github.com/NVIDIA/Megatron-LM) expects it:

- `<prefix>.bin`: every sequence's tokens back to back, little-endian, in the dataset's dtype.
- `<prefix>.idx`, all integers little-endian:
  the 9-byte magic `b"MMIDIDX\\x00\\x00"`; the version, uint64 = 1; the dtype code, uint8
  (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16); the sequence count,
  uint64; the document-index count, uint64 (documents + 1); then the sequence lengths (int32 each),
  the sequence pointers (int64 byte offsets into the .bin), and the document indices (int64: the
  index of each document's first sequence, starting at 0 and ending with the sequence count).
  The multimodal variant appends an int8 mode per sequence; we never write it.

Megatron's token dtype rule (`DType.optimal_dtype`): uint16 when the vocabulary has fewer than 65,500
entries, int32 otherwise. Like Megatron's `preprocess_data.py` without sentence splitting, every
document here is exactly one sequence.

Memory does not grow with the dataset: tokens go to the .bin as they arrive, and the sequence lengths
are spilled to a temporary file, from which the .idx is written in fixed-size chunks at the end. Both
files go through `schemas.atomic.atomic_open`, so a killed export leaves no torn file under a final name.
An empty dataset gets an empty .bin, as Megatron's own `IndexedDatasetBuilder` writes it (Megatron's
mmap reader cannot map an empty file: read such a dataset with `mmap=False`).
"""

from __future__ import annotations

import struct
import tempfile
from contextlib import ExitStack
from typing import IO, Any

import numpy as np

from schemas.atomic import atomic_open

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.uint16): 8,
}
UINT16_VOCAB_LIMIT = 65500  # Megatron's cut-off for uint16 tokens (DType.optimal_dtype)
CHUNK = 1 << 20  # sequence lengths per read when the .idx is written


def token_dtype(vocab_size: int) -> np.dtype:
    """Megatron's rule: uint16 tokens when the vocabulary has fewer than 65,500 entries, else int32."""
    return np.dtype(np.uint16) if vocab_size < UINT16_VOCAB_LIMIT else np.dtype(np.int32)


def idx_path(prefix: str) -> str:
    return f"{prefix}.idx"


def bin_path(prefix: str) -> str:
    return f"{prefix}.bin"


class IndexedDatasetWriter:
    """Writes `<prefix>.bin` and `<prefix>.idx`, one document (= one sequence) per `add` call.

    Use as a context manager: both files appear when the block ends without an exception, neither
    otherwise."""

    def __init__(self, prefix: str, dtype: np.dtype | type) -> None:
        self.prefix = prefix
        self.dtype = np.dtype(dtype)
        if self.dtype not in DTYPE_CODES:
            raise ValueError(f"Megatron's indexed dataset has no code for dtype {self.dtype}")
        self.documents = 0
        self.tokens = 0
        self._stack = ExitStack()
        self._bin: IO[Any] | None = None
        self._lengths: IO[bytes] | None = None

    def __enter__(self) -> IndexedDatasetWriter:
        self._bin = self._stack.enter_context(atomic_open(bin_path(self.prefix)))
        self._lengths = self._stack.enter_context(tempfile.TemporaryFile())
        return self

    def add_many(self, tokens: np.ndarray, lengths: np.ndarray) -> None:
        """Append documents given as their tokens back to back and their lengths (which must add up)."""
        assert self._bin is not None and self._lengths is not None, "use the writer as a context manager"
        lengths = np.asarray(lengths, dtype=np.int64)
        if int(lengths.sum()) != len(tokens):
            raise ValueError(f"document lengths add up to {int(lengths.sum())}, not the {len(tokens)} tokens")
        if len(lengths) and (lengths.min() < 0 or lengths.max() > np.iinfo(np.int32).max):
            raise ValueError("a document length does not fit the index's int32")
        values = np.asarray(tokens)
        if len(values) and self.dtype.kind in "iu":
            info = np.iinfo(self.dtype)
            if values.min() < info.min or values.max() > info.max:
                raise ValueError(
                    f"token ids {int(values.min())}..{int(values.max())} do not fit {self.dtype}: "
                    "give a larger vocabulary size"
                )
        self._bin.write(values.astype(self.dtype.newbyteorder("<"), copy=False).tobytes())
        self._lengths.write(lengths.astype("<i4").tobytes())
        self.documents += len(lengths)
        self.tokens += len(values)

    def add(self, tokens: np.ndarray) -> None:
        """Append one document."""
        self.add_many(np.asarray(tokens), np.array([len(tokens)]))

    def __exit__(self, kind, error, traceback) -> None:
        try:
            if error is None:
                self._write_index()
        finally:
            self._stack.__exit__(kind, error, traceback)

    def _write_index(self) -> None:
        assert self._lengths is not None
        count = self.documents
        with atomic_open(idx_path(self.prefix)) as idx:
            idx.write(MAGIC)
            idx.write(struct.pack("<Q", VERSION))
            idx.write(struct.pack("<B", DTYPE_CODES[self.dtype]))
            idx.write(struct.pack("<Q", count))
            idx.write(struct.pack("<Q", count + 1))
            for chunk in self._length_chunks():
                idx.write(chunk.tobytes())
            pointer = 0
            for chunk in self._length_chunks():
                ends = np.cumsum(chunk, dtype=np.int64) * self.dtype.itemsize + pointer
                starts = np.concatenate([[pointer], ends[:-1]]).astype("<i8")
                idx.write(starts.tobytes())
                pointer = int(ends[-1])
            for at in range(0, count + 1, CHUNK):
                idx.write(np.arange(at, min(at + CHUNK, count + 1), dtype="<i8").tobytes())

    def _length_chunks(self):
        assert self._lengths is not None
        self._lengths.seek(0)
        while data := self._lengths.read(CHUNK * 4):
            yield np.frombuffer(data, dtype="<i4")

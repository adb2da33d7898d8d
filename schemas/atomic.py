"""The one write-then-rename helper: a file appears whole under its name, or not at all.

Everything that writes a finished artefact (trajectory shards, manifests, attachments, token shards,
JSON-lines corpora, reports, summaries) goes through `atomic_open`, on any fsspec filesystem. A writer
killed mid-write leaves only a `.tmp-*` file, which readers skip and `cleanup_temporaries` removes.
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

TMP_PREFIX = ".tmp-"


def temporary_name(target: str) -> str:
    """A unique hidden sibling of `target`, keeping its extension (some readers go by it)."""
    directory, name = posixpath.split(target)
    return posixpath.join(directory, f"{TMP_PREFIX}{uuid.uuid4().hex}-{name}")


@contextmanager
def atomic_open(target: str, mode: str = "wb", *, fs: AbstractFileSystem | None = None) -> Iterator[IO[Any]]:
    """Open a temporary sibling of `target` for writing; rename it onto `target` when the block ends
    without an exception, remove it otherwise. `target` is a URI, or a path on `fs` when given."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open writes whole files; mode {mode!r} is not 'wb' or 'w'")
    if fs is None:
        fs, target = url_to_fs(target)
    tmp = temporary_name(target)
    fs.makedirs(posixpath.dirname(target), exist_ok=True)
    try:
        with fs.open(tmp, mode) as out:
            yield out
        fs.mv(tmp, target)
    except BaseException:
        if fs.exists(tmp):
            fs.rm(tmp)
        raise


def atomic_write(target: str, data: bytes | str, *, fs: AbstractFileSystem | None = None) -> None:
    """Write `data` to `target` atomically (see `atomic_open`)."""
    with atomic_open(target, "w" if isinstance(data, str) else "wb", fs=fs) as out:
        out.write(data)

"""The one write-then-rename helper: a file appears whole under its name, or not at all.

Everything that writes a finished artefact (trajectory shards, manifests, attachments, token shards,
JSON-lines corpora, reports, summaries) goes through `atomic_open`, on any fsspec filesystem. A writer
killed mid-write leaves only a `.tmp-*` file, which readers skip and `cleanup_temporaries` removes.

Object stores (s3://, gs://, Azure) need no temporary: one PUT, or a multipart upload's final
"complete" call, makes an object appear whole or not at all, and a "rename" there is a copy plus a
delete. So on those the file is streamed as the store's own upload (memory holds one part, not the
file: token shards can be large), completed when the block ends without an exception and aborted
otherwise; a writer killed before that leaves no object behind.
"""

from __future__ import annotations

import io
import posixpath
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

TMP_PREFIX = ".tmp-"
# Stores whose uploads are atomic per object (S3 and S3-compatible servers, GCS, Azure blobs).
OBJECT_STORE_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az"})


def temporary_name(target: str) -> str:
    """A unique hidden sibling of `target`, keeping its extension (some readers go by it)."""
    directory, name = posixpath.split(target)
    return posixpath.join(directory, f"{TMP_PREFIX}{uuid.uuid4().hex}-{name}")


def is_object_store(fs: AbstractFileSystem) -> bool:
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return bool(OBJECT_STORE_PROTOCOLS & set(protocols))


@contextmanager
def atomic_open(target: str, mode: str = "wb", *, fs: AbstractFileSystem | None = None) -> Iterator[IO[Any]]:
    """Open a temporary sibling of `target` for writing; rename it onto `target` when the block ends
    without an exception, remove it otherwise. On an object store, buffer and upload once instead.
    `target` is a URI, or a path on `fs` when given."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open writes whole files; mode {mode!r} is not 'wb' or 'w'")
    if fs is None:
        fs, target = url_to_fs(target)
    if is_object_store(fs):
        with _streamed_upload(fs, target, mode) as out:
            yield out
        return
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


@contextmanager
def _streamed_upload(fs: AbstractFileSystem, target: str, mode: str) -> Iterator[IO[Any]]:
    raw = fs.open(target, "wb")
    try:
        if mode == "wb":
            yield raw
        else:
            text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
            yield text
            text.flush()
            text.detach()  # leaves `raw` open: closing it below is what completes the upload
    except BaseException:
        raw.discard()  # s3fs and gcsfs abort the upload here
        raw.closed = True  # and close() must not complete it
        raise
    raw.close()


def atomic_write(target: str, data: bytes | str, *, fs: AbstractFileSystem | None = None) -> None:
    """Write `data` to `target` atomically (see `atomic_open`)."""
    with atomic_open(target, "w" if isinstance(data, str) else "wb", fs=fs) as out:
        out.write(data)

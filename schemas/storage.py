"""Crash-safe, resumable trajectory datasets on any fsspec filesystem.

Layout of a dataset ROOT (a local path or a URI such as gs://bucket/run):

    ROOT/domain=<domain>/part-<writer_id>-<seq>.parquet   one row per trajectory, zstd
    ROOT/_manifest/part-<writer_id>-<seq>.json            {"shard", "trajectory_ids", "rows", ...}
    ROOT/attachments/sha256/<first2>/<hex>                blobs, see schemas.attachments

Every file is written under a `.tmp-<uuid>` name and renamed into place, and a shard's manifest
entry is written only after the shard itself, so a killed writer leaves either nothing or a shard
that readers ignore until its entry exists. One manifest file per shard means concurrent writers
(threads, processes, machines) never contend for a shared file.

Object stores and network mounts fail now and then for a moment (a reset connection, a timeout,
EIO from a FUSE mount). Commits, attachment writes and manifest reads retry such errors
(`is_transient`) a few times
with growing pauses (about 1.4 s in all) and then raise StorageError naming the path. A manifest
entry that cannot be read is never silently skipped: its trajectories would look unfinished and a
rerun would record them twice.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import posixpath
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

from schemas.arrow import TRAJECTORY_SCHEMA
from schemas.atomic import TMP_PREFIX, atomic_open, atomic_write
from schemas.attachments import AttachmentStore, StorageError
from schemas.codec import to_row
from schemas.lock import DatasetLock
from schemas.records import SCHEMA_VERSION, Trajectory
from schemas.validation import decode_row, validate, validate_row

logger = logging.getLogger(__name__)

MANIFEST_DIR = "_manifest"
_WRITER_ID = re.compile(r"[A-Za-z0-9._-]+")
_GLOB_CHARS = frozenset("*?[")
_SHARD_DIR = re.compile(r"shard-\d+-of-\d+")
_READ_BATCH_ROWS = 64
RETRY_DELAYS_S = (0.2, 0.4, 0.8)
_TRANSIENT_ERRNOS = frozenset(
    {
        errno.EAGAIN,
        errno.EBUSY,
        errno.EINTR,
        errno.EIO,
        errno.ETIMEDOUT,
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ECONNREFUSED,
        errno.ENETDOWN,
        errno.ENETUNREACH,
        errno.EHOSTUNREACH,
        errno.EPIPE,
        errno.ESTALE,
    }
)
# Network failures that object-store clients raise as their own types, not as OSError (s3fs lets
# botocore's through once its own retries are spent): named, so neither client must be installed.
_CLIENT_NETWORK_ERRORS = frozenset(
    {
        "botocore.exceptions.ConnectionError",  # EndpointConnectionError, ConnectTimeoutError, ...
        "botocore.exceptions.HTTPClientError",  # ReadTimeoutError, ConnectionClosedError, ...
        "aiohttp.client_exceptions.ClientConnectionError",
        "aiohttp.client_exceptions.ServerTimeoutError",
    }
)
T = TypeVar("T")


def _is_client_network_error(exc: BaseException) -> bool:
    return any(f"{c.__module__}.{c.__qualname__}" in _CLIENT_NETWORK_ERRORS for c in type(exc).__mro__)


def is_transient(exc: BaseException | None) -> bool:
    """An I/O error that may go away on its own (network, timeouts, a busy or flaky mount)."""
    if isinstance(exc, ConnectionError | TimeoutError | InterruptedError | BlockingIOError):
        return True
    if exc is not None and _is_client_network_error(exc):
        return True
    return isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS


def retry_transient(call: Callable[[], T], what: str) -> T:
    """`call()`, retried after each transient error (also one wrapped in a StorageError) with
    pauses of RETRY_DELAYS_S; the last error (or any other) propagates, a client library's own
    network error as a ConnectionError (an OSError) so callers need to catch only OSError."""
    for delay in (*RETRY_DELAYS_S, None):
        try:
            return call()
        except Exception as exc:
            if not isinstance(exc, OSError | StorageError) and not _is_client_network_error(exc):
                raise
            if delay is None or not (is_transient(exc) or is_transient(exc.__cause__)):
                if _is_client_network_error(exc):
                    raise ConnectionError(str(exc)) from exc
                raise
            logger.warning("%s: %s; retrying in %.1f s", what, exc, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")


def default_writer_id() -> str:
    """hostname-pid-random: unique across machines, processes and restarts of one process."""
    host = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@dataclass
class _ShardBuffer:
    rows: list[dict[str, Any]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    estimated_bytes: int = 0


class TrajectoryWriter:
    """Buffers validated trajectories per domain and commits them as Parquet shards.

    Thread-safe. `written_ids` holds the ids whose shard and manifest entry are committed, i.e.
    what `finished_ids(root)` will report to a later run.
    """

    def __init__(
        self,
        root: str,
        *,
        writer_id: str | None = None,
        max_rows_per_shard: int = 256,
        max_bytes_per_shard: int = 64 << 20,
        row_group_size: int = 64,
        attachments_root: str | None = None,
        track_ids: bool = True,
    ) -> None:
        self.writer_id = writer_id or default_writer_id()
        # A generated id holds a random part no earlier run can have used: its names need no check,
        # which saves two round trips per shard on an object store.
        self._id_is_new = writer_id is None
        if not _WRITER_ID.fullmatch(self.writer_id):
            raise ValueError(f"writer_id {self.writer_id!r} may only hold letters, digits, '.', '_', '-'")
        if min(max_rows_per_shard, max_bytes_per_shard, row_group_size) < 1:
            raise ValueError("shard and row-group limits must be positive")
        self.root = root
        self.fs, self._root_path = url_to_fs(root)
        self._check_writable()
        self._max_rows = max_rows_per_shard
        self._max_bytes = max_bytes_per_shard
        self._row_group_size = row_group_size
        # A shard sub-root stores blobs in the dataset root, where readers of the union resolve them.
        self._attachments = AttachmentStore(attachments_root or root)
        self._lock = threading.Lock()
        self._buffers: dict[str, _ShardBuffer] = {}
        self._next_seq = 0
        # `written_ids` for callers that ask; an import of millions of rows does not, and its memory
        # must not grow with them.
        self._track_ids = track_ids
        self._written: set[str] = set()
        self._closed = False

    @property
    def written_ids(self) -> set[str]:
        if not self._track_ids:
            raise RuntimeError("this writer was made with track_ids=False")
        with self._lock:
            return set(self._written)

    def write(self, t: Trajectory) -> None:
        """Validate `t`, store its in-memory attachments (filling sha256/size/uri), buffer its row."""
        validate(t)
        with self._lock:
            if self._closed:
                raise StorageError(f"writer {self.writer_id} on {self.root} is closed")
            self.store_attachments(t)
            row = to_row(t)
            buffer = self._buffers.setdefault(t.domain, _ShardBuffer())
            buffer.rows.append(row)
            buffer.ids.append(t.trajectory_id)
            buffer.estimated_bytes += len(json.dumps(row, default=str, ensure_ascii=False).encode())
            if len(buffer.rows) >= self._max_rows or buffer.estimated_bytes >= self._max_bytes:
                self._commit(t.domain)

    def flush(self) -> None:
        """Commit every buffered row as shards. On failure the rows stay buffered for a retry."""
        with self._lock:
            for domain in list(self._buffers):
                self._commit(domain)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            for domain in list(self._buffers):
                self._commit(domain)
            self._closed = True

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_writable(self) -> None:
        probe = posixpath.join(self._root_path, f"{TMP_PREFIX}probe-{uuid.uuid4().hex}")

        def attempt() -> None:
            self.fs.makedirs(self._root_path, exist_ok=True)
            with self.fs.open(probe, "wb") as out:
                out.write(b"probe")
            self.fs.rm(probe)

        try:
            retry_transient(attempt, f"probing {self.root}")
        # Any backend's failure (auth, permissions, a file in the way) makes the root unusable.
        except Exception as exc:
            raise StorageError(
                f"cannot write to {self.root}: {exc}; choose another --out or fix permissions"
            ) from exc

    def store_attachments(self, t: Trajectory) -> None:
        """Store `t`'s in-memory attachments, filling their sha256, size and uri (`write` does it too)."""
        for observation in [t.initial_observation, *(step.observation for step in t.steps)]:
            for attachment in observation.attachments:
                if attachment.content is None:
                    continue
                stored = retry_transient(
                    lambda a=attachment: self._attachments.put(a.content, a.name, a.media_type),
                    f"storing attachment {attachment.name}",
                )
                attachment.sha256, attachment.size, attachment.uri = stored.sha256, stored.size, stored.uri
                attachment.content = None

    def _claim_shard_name(self, domain: str) -> str:
        # A writer_id reused across runs must not overwrite the earlier run's shards.
        while True:
            name = f"part-{self.writer_id}-{self._next_seq:05d}"
            self._next_seq += 1
            if self._id_is_new:
                return name
            taken = self.fs.exists(self._path(MANIFEST_DIR, f"{name}.json")) or self.fs.exists(
                self._path(f"domain={domain}", f"{name}.parquet")
            )
            if not taken:
                return name

    def write_table(self, domain: str, table: pa.Table) -> None:
        """Commit rows already in `TRAJECTORY_SCHEMA`'s layout, checked by `schemas.columnar`, as shards
        of at most `max_rows_per_shard` rows: the path of importers that convert whole Arrow batches."""
        if table.schema != TRAJECTORY_SCHEMA:
            table = table.cast(TRAJECTORY_SCHEMA)
        with self._lock:
            if self._closed:
                raise StorageError(f"writer {self.writer_id} on {self.root} is closed")
            for start in range(0, table.num_rows, self._max_rows):
                part = table.slice(start, self._max_rows)
                self._commit_table(domain, part, part.column("trajectory_id").to_pylist())

    def _commit(self, domain: str) -> None:
        buffer = self._buffers.get(domain)
        if buffer is None or not buffer.rows:
            return
        try:
            table = pa.Table.from_pylist(buffer.rows, schema=TRAJECTORY_SCHEMA)
        except pa.ArrowException as exc:
            raise StorageError(f"cannot commit a {domain} shard under {self.root}: {exc}") from exc
        self._commit_table(domain, table, buffer.ids)
        del self._buffers[domain]

    def _commit_table(self, domain: str, table: pa.Table, ids: list[str]) -> None:
        def write_shard() -> None:
            with atomic_open(self._path(shard), fs=self.fs) as out:
                pq.write_table(table, out, compression="zstd", row_group_size=self._row_group_size)

        try:
            name = retry_transient(lambda: self._claim_shard_name(domain), f"naming a {domain} shard")
            shard = f"domain={domain}/{name}.parquet"
            retry_transient(write_shard, f"writing {shard}")
            entry = {
                "shard": shard,
                "trajectory_ids": ids,
                "rows": table.num_rows,
                "domain": domain,
                "writer_id": self.writer_id,
                "schema_version": SCHEMA_VERSION,
                "created_at": datetime.now(UTC).isoformat(),
            }
            manifest_text = json.dumps(entry, ensure_ascii=False, indent=1).encode()
            manifest_path = self._path(MANIFEST_DIR, f"{name}.json")
            # Retried on its own: redoing the shard would leave a copy that no manifest lists.
            retry_transient(
                lambda: atomic_write(manifest_path, manifest_text, fs=self.fs), f"writing {manifest_path}"
            )
        except (OSError, pa.ArrowException) as exc:
            raise StorageError(f"cannot commit a {domain} shard under {self.root}: {exc}") from exc
        if self._track_ids:
            self._written.update(ids)

    def _path(self, *parts: str) -> str:
        return posixpath.join(self._root_path, *parts)


def shard_dir_name(index: int, count: int) -> str:
    """The sub-root where shard `index` of `count` (a `--shard i/n` collector) writes."""
    return f"shard-{index}-of-{count}"


def _manifest_roots(fs: AbstractFileSystem, root_path: str) -> list[str]:
    """`root_path` and its shard sub-roots: a dataset is the union of all their manifests."""
    try:
        children = _io(lambda: fs.ls(root_path, detail=False), f"listing {_display(fs, root_path)}")
    except FileNotFoundError:
        return [root_path]
    names = {posixpath.basename(child.rstrip("/")) for child in children}
    return [root_path, *(posixpath.join(root_path, n) for n in sorted(names) if _SHARD_DIR.fullmatch(n))]


def _manifest_entries(fs: AbstractFileSystem, root_path: str, roots: list[str]) -> list[dict[str, Any]]:
    """Every manifest entry under `roots` (`root_path` and its shard sub-roots), each "shard" made relative to
    `root_path`. Transient errors are retried; a file that still cannot be read raises StorageError,
    while one that reads but is not JSON is logged and passed over (its shard then stays invisible
    to readers too)."""
    entries = []
    for manifest_root in roots:
        prefix = posixpath.relpath(manifest_root, root_path) if manifest_root != root_path else ""
        pattern = posixpath.join(manifest_root, MANIFEST_DIR, "*.json")
        for path in sorted(_io(lambda p=pattern: fs.glob(p), f"listing {_display(fs, pattern)}")):
            if posixpath.basename(path).startswith(TMP_PREFIX):
                continue
            try:
                data = _io(lambda p=path: fs.cat_file(p), f"reading manifest entry {_display(fs, path)}")
            except FileNotFoundError:  # removed between listing and reading
                continue
            try:
                entry = json.loads(data)
            except ValueError as exc:
                logger.warning("ignoring corrupt manifest entry %s: %s", _display(fs, path), exc)
                continue
            if isinstance(entry, dict) and isinstance(entry.get("shard"), str):
                entries.append({**entry, "shard": posixpath.join(prefix, entry["shard"])})
    return entries


def _io(call: Callable[[], T], what: str) -> T:
    """retry_transient, with what still fails after the retries as a StorageError."""
    try:
        return retry_transient(call, what)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StorageError(f"{what}: {exc}") from exc


def _committed_entries(fs: AbstractFileSystem, root_path: str) -> list[dict[str, Any]]:
    """Entries whose shard exists. One listing of the shard files instead of a request per entry:
    on an object store each existence check is a round trip."""
    roots = _manifest_roots(fs, root_path)
    entries = _manifest_entries(fs, root_path, roots)
    present = set()
    for root in roots:
        pattern = posixpath.join(root, "domain=*", "*.parquet")
        listed = _io(lambda p=pattern: fs.glob(p), f"listing shards of {_display(fs, root)}")
        present.update(fs._strip_protocol(path) for path in listed)
    return [e for e in entries if fs._strip_protocol(posixpath.join(root_path, e["shard"])) in present]


def finished_ids(root: str) -> set[str]:
    """Ids of trajectories committed under `root` or its shard sub-roots (manifest entry written and
    shard present). Raises StorageError when the manifest cannot be read, rather than under-report."""
    fs, root_path = url_to_fs(root)
    fs.invalidate_cache()  # another process (a killed run, another shard) may have written since
    if not _io(lambda: fs.isdir(root_path), f"opening {root}"):
        return set()
    return {tid for entry in _committed_entries(fs, root_path) for tid in entry.get("trajectory_ids", [])}


def cleanup_temporaries(lock: DatasetLock) -> int:
    """Remove the `.tmp-*` leftovers of killed writers under the locked root; returns how many.
    Only the lock's holder may do this: another writer's in-flight temporaries look the same.
    Shard sub-roots have locks of their own and are left to their holders."""
    if not lock.held:
        raise StorageError(f"cleanup_temporaries needs the lock on {lock.root}; acquire() it first")
    lock.check()
    fs, root_path = url_to_fs(lock.root)
    fs.invalidate_cache()
    if not _io(lambda: fs.isdir(root_path), f"opening {lock.root}"):
        return 0
    leftovers = [
        path
        for path in _io(lambda: fs.find(root_path), f"listing {lock.root}")
        if posixpath.basename(path).startswith(TMP_PREFIX)
        and not _SHARD_DIR.fullmatch(posixpath.relpath(path, root_path).split("/")[0])
    ]
    for path in leftovers:
        _io(lambda p=path: fs.rm(p), f"removing {_display(fs, path)}")
    return len(leftovers)


def _display(fs: AbstractFileSystem, path: str) -> str:
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else fs.protocol
    return path if "file" in protocols else fs.unstrip_protocol(path)


def dataset_files(path: str) -> list[str]:
    """The Parquet files `path` designates: a dataset root (the shards its manifest and its shard
    sub-roots' manifests list, when it has any; else every *.parquet under it), a single file, or a
    glob. Returned as openable URLs."""
    fs, local = url_to_fs(path)
    fs.invalidate_cache()  # a listing cached in this process may predate another writer's commits
    if _GLOB_CHARS & set(local):
        files = fs.glob(local)
    elif fs.isfile(local):
        files = [local]
    elif fs.isdir(local):
        if any(fs.isdir(posixpath.join(r, MANIFEST_DIR)) for r in _manifest_roots(fs, local)):
            files = [posixpath.join(local, entry["shard"]) for entry in _committed_entries(fs, local)]
        else:
            files = [p for p in fs.find(local) if p.endswith(".parquet")]
    else:
        raise StorageError(f"no dataset, file or glob match at {path}")
    kept = sorted(p for p in files if not posixpath.basename(p).startswith(TMP_PREFIX))
    return [_display(fs, p) for p in kept]


def read_rows(path: str, *, on_error: Literal["raise", "skip"] = "raise") -> Iterator[dict[str, Any]]:
    """Rows of every file under `path`, batch by batch. An unreadable file raises StorageError
    naming it, or with on_error="skip" is logged as a warning and passed over."""
    for file in dataset_files(path):
        fs, local = url_to_fs(file)
        try:
            with fs.open(local, "rb") as source:
                for batch in pq.ParquetFile(source).iter_batches(batch_size=_READ_BATCH_ROWS):
                    yield from batch.to_pylist()
        except (OSError, pa.ArrowException) as exc:
            if on_error == "raise":
                raise StorageError(f"cannot read {file}: {exc}") from exc
            logger.warning("skipping unreadable file %s: %s", file, exc)


def read_trajectories(
    path: str, *, validate: bool = False, on_error: Literal["raise", "skip"] = "raise"
) -> Iterator[Trajectory]:
    """Trajectories under `path` (see `dataset_files`). Rows that do not decode, or with
    validate=True do not validate, raise ValidationError naming the trajectory and field."""
    for row in read_rows(path, on_error=on_error):
        yield validate_row(row) if validate else decode_row(row)

"""One writer per dataset root: `DatasetLock(root).acquire()` before a collector touches `root`.

Local paths: an exclusive `fcntl.flock` on ROOT/.lock, held until `release()` or until the
process exits. The kernel drops it however the holder dies (kill -9 included), so a lock is never
stale. The file also names the holder (host, pid, start time) for the refusal message. `release()`
removes the file (a killed holder leaves it, unlocked, for the next run to take).

Object stores (gs://, s3://, memory://, ...) cannot lock. There ROOT/.lock is a lease: JSON with
the holder and a heartbeat time that a background thread rewrites every `heartbeat_s` (5 s, at most
`ttl_s / 4`). A run that finds another holder's lease younger than `ttl_s` (60 s) watches it for
`WATCHED_BEATS` heartbeats: renewed, the holder lives and the run refuses to start; unchanged, the
holder died (a pod killed and retried on another node) and the run takes the lease over, after
15 s rather than the whole ttl. A lease older than `ttl_s` is taken over at once, and so is one
whose holder ran in this machine's pid namespace and is gone (a collector killed with -9 and
restarted on the same host). After writing its lease a run reads it back a moment later: of two
runs that start together the later write wins and the other refuses. fsspec offers no
compare-and-swap, so this narrows the race without closing it; a run that later finds another
holder's lease on its heartbeat reports `lost` and `check()` raises. Give concurrent object-store
runs distinct roots (`--shard` does).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import posixpath
import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

from schemas.atomic import atomic_write
from schemas.attachments import StorageError

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"
WATCHED_BEATS = 3  # heartbeats a silent lease is watched before its holder is taken for dead


class DatasetLockedError(StorageError):
    """Another live process holds the dataset root."""


def _is_local(fs: AbstractFileSystem) -> bool:
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return "file" in protocols or "local" in protocols


def _holder_text(holder: dict[str, Any]) -> str:
    if not holder:
        return "another process (it has not written its name yet)"
    pid, host, since = (holder.get(key, "?") for key in ("pid", "host", "started_at"))
    return f"pid {pid} on host {host}, since {since}"


class DatasetLock:
    """Exclusive use of a dataset root for one run; a context manager."""

    def __init__(
        self, root: str, *, ttl_s: float = 60.0, settle_s: float = 0.5, heartbeat_s: float | None = None
    ) -> None:
        self.root = root
        self.fs, self._root_path = url_to_fs(root)
        self.path = posixpath.join(self._root_path, LOCK_NAME)
        self.local = _is_local(self.fs)
        self.ttl_s = ttl_s
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else min(5.0, ttl_s / 4)
        self._settle_s = settle_s
        self.holder = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "pid_namespace": _pid_namespace(),
            "token": uuid.uuid4().hex,
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        self._fd: int | None = None
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        self.lost: str | None = None
        self.held = False

    def acquire(self) -> DatasetLock:
        """Take the lock or raise DatasetLockedError naming the holder (StorageError if unwritable)."""
        if self.held:
            return self
        try:
            self.fs.makedirs(self._root_path, exist_ok=True)
        except Exception as exc:  # any backend's failure makes the root unusable
            raise StorageError(f"cannot write to {self.root}: {exc}; choose another --out") from exc
        if self.local:
            self._acquire_flock()
        else:
            self._acquire_lease()
        self.held = True
        return self

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        if self._fd is not None:
            # Removed while still locked: a process that opened this file before and locks it after
            # finds it gone from the path and locks the path's new file instead (_acquire_flock).
            try:
                os.unlink(self.path)
            except OSError as exc:
                log.warning("could not remove the lock file %s: %s", self.path, exc)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
            return
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        try:
            if self._read_lease().get("token") == self.holder["token"]:
                self.fs.rm(self.path)
        except Exception as exc:  # it expires by itself; say so rather than fail the run's end
            log.warning(
                "could not remove the lease %s (it expires in %.0f s): %s", self.path, self.ttl_s, exc
            )

    def check(self) -> None:
        """Raise StorageError if another run took over this lease (object stores only)."""
        if self.lost:
            raise StorageError(self.lost)

    def __enter__(self) -> DatasetLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- local: flock ----------------------------------------------------------------------------

    def _acquire_flock(self) -> None:
        while not self._flock_once():
            pass  # the holder released and removed the file we locked: lock the one now at the path

    def _flock_once(self) -> bool:
        """Lock the file at the path; False when that file was removed before we held it."""
        # os.open's descriptor is not inherited by children (PEP 446): a tmux server or container
        # started by this run cannot keep the lock alive after the run dies.
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot write to {self.root}: {exc}; choose another --out") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _parse(os.pread(fd, 4096, 0))
            os.close(fd)
            raise DatasetLockedError(
                f"{self.root} is in use by another collector ({_holder_text(holder)}); wait for it to "
                "finish, stop it, or choose another --out. The lock goes away with that process."
            ) from None
        except OSError as exc:  # a mount without locks (some FUSE and network filesystems)
            os.close(fd)
            raise StorageError(
                f"cannot lock {self.path}: {exc}; this filesystem has no file locks, so write to a "
                "local directory or use its object-store URI (gs://, s3://) instead"
            ) from exc
        if not _names_file(self.path, fd):
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(self.holder).encode() + b"\n", 0)
        self._fd = fd
        return True

    # -- object stores: lease --------------------------------------------------------------------

    def _read_lease(self) -> dict[str, Any]:
        # cat_file after dropping cached listings: s3fs answers `open` from a cached listing's
        # size, which would cut a lease rewritten since (by another run) short and unreadable.
        self.fs.invalidate_cache(self.path)
        try:
            return _parse(self.fs.cat_file(self.path))
        except FileNotFoundError:
            return {}

    def _holder_gone(self, lease: dict[str, Any]) -> bool:
        """True only when the holder provably died: same host and pid namespace, and no such pid.
        Our own pid under another token is treated as alive (another lock object in this process)."""
        pid = lease.get("pid")
        same_namespace = (
            lease.get("host") == self.holder["host"]
            and lease.get("pid_namespace") is not None
            and lease.get("pid_namespace") == self.holder["pid_namespace"]
        )
        if not same_namespace or not isinstance(pid, int) or pid == os.getpid() or pid <= 0:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # exists but belongs to someone else
            return False
        return False

    def _lease_age(self, lease: dict[str, Any]) -> float:
        return time.time() - float(lease.get("heartbeat", 0.0))

    def _write_lease(self) -> None:
        atomic_write(self.path, json.dumps({**self.holder, "heartbeat": time.time()}).encode(), fs=self.fs)

    def _refuse_if_fresh(self, lease: dict[str, Any]) -> None:
        if self._fresh_and_foreign(lease) and not self._holder_gone(lease):
            expires = self.ttl_s - self._lease_age(lease)
            raise DatasetLockedError(
                f"{self.root} is in use by another collector ({_holder_text(lease)}; its lease was "
                f"renewed {self._lease_age(lease):.0f} s ago); wait for it to finish or choose another "
                f"--out. If that process is gone, its lease expires in {expires:.0f} s."
            )

    def _fresh_and_foreign(self, lease: dict[str, Any]) -> bool:
        foreign = bool(lease) and lease.get("token") != self.holder["token"]
        return foreign and self._lease_age(lease) < self.ttl_s

    def _watch(self, lease: dict[str, Any]) -> None:
        """Refuse (DatasetLockedError) if `lease` is renewed or replaced within WATCHED_BEATS
        heartbeats; return if it is released, or stays unchanged (its holder is dead)."""
        deadline = time.monotonic() + WATCHED_BEATS * self.heartbeat_s
        while time.monotonic() < deadline:
            time.sleep(min(0.5, self.heartbeat_s / 4))
            current = self._read_lease()
            if not current:
                return
            if current != lease:
                self._refuse_if_fresh(current)
                return
        log.warning(
            "taking over the lease on %s from %s: not renewed for %.0f s",
            self.root, _holder_text(lease), self._lease_age(lease),
        )  # fmt: skip

    def _acquire_lease(self) -> None:
        try:
            lease = self._read_lease()
            if self._fresh_and_foreign(lease) and not self._holder_gone(lease):
                self._watch(lease)
            self._write_lease()
            time.sleep(self._settle_s)
            self._refuse_if_fresh(self._read_lease())
        except DatasetLockedError:
            raise
        except Exception as exc:
            raise StorageError(f"cannot take the lease {self.root}/{LOCK_NAME}: {exc}") from exc
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._renew, name="dataset-lease", daemon=True)
        self._heartbeat.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                lease = self._read_lease()
                if lease.get("token") != self.holder["token"]:
                    self.lost = (
                        f"lost the lease on {self.root} to {_holder_text(lease)}; stop one of the two runs"
                    )
                    log.error(self.lost)
                    return
                self._write_lease()
            except Exception as exc:  # a transient error: the next beat tries again within the ttl
                log.warning("could not renew the lease on %s: %s", self.root, exc)


def _names_file(path: str, fd: int) -> bool:
    """Whether `path` still names the file open as `fd`."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (at_path.st_dev, at_path.st_ino) == (held.st_dev, held.st_ino)


def _pid_namespace() -> str | None:
    """Which pid numbering this process lives in: the namespace inode plus the kernel's boot id,
    so two containers (or hosts) that share a hostname are not taken for one another."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            return f"{boot.read().strip()}/{namespace}"
    except OSError:
        return None


def _parse(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}

import errno
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import fsspec
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

from schemas.attachments import AttachmentStore, StorageError
from schemas.lock import DatasetLock, DatasetLockedError
from schemas.records import Attachment
from schemas.storage import (
    RETRY_DELAYS_S,
    TrajectoryWriter,
    cleanup_temporaries,
    dataset_files,
    finished_ids,
    read_trajectories,
)
from schemas.validation import ValidationError
from tests.schemas.factories import SCREENSHOT, rich_trajectory, small_trajectory


def _write(root, trajectories, **options):
    with TrajectoryWriter(str(root), **options) as writer:
        for t in trajectories:
            writer.write(t)
    return writer


def test_rich_trajectory_round_trips_through_writer_and_reader(tmp_path):
    t = rich_trajectory()
    _write(tmp_path, [t])
    # write() stored the blobs and replaced content by their address
    attachment = t.steps[1].observation.attachments[1]
    assert attachment.content is None and attachment.size == len("日本語\n".encode())
    assert attachment.uri == f"attachments/sha256/{attachment.sha256[:2]}/{attachment.sha256}"

    (back,) = read_trajectories(str(tmp_path), validate=True)
    assert back == t
    assert back.steps[0].reward is None and back.steps[1].reward == 1.0
    assert back.steps[1].observation.text == "\x1b[1mhéllo 🌍\x1b[0m\nroot@box:/w# "
    assert AttachmentStore(str(tmp_path)).get(back.initial_observation.attachments[0]) == SCREENSHOT


def test_layout_manifest_and_row_groups(tmp_path):
    writer = _write(tmp_path, [small_trajectory(f"t{i}") for i in range(5)], writer_id="w1", row_group_size=2)
    shard = tmp_path / "domain=terminal" / "part-w1-00000.parquet"
    assert pq.ParquetFile(shard).metadata.num_row_groups == 3
    assert pq.ParquetFile(shard).metadata.row_group(0).column(0).compression == "ZSTD"
    entry = json.loads((tmp_path / "_manifest" / "part-w1-00000.json").read_text())
    assert entry["shard"] == "domain=terminal/part-w1-00000.parquet"
    assert entry["trajectory_ids"] == [f"t{i}" for i in range(5)] and entry["rows"] == 5
    assert entry["domain"] == "terminal"
    assert writer.written_ids == {f"t{i}" for i in range(5)}


def test_shards_roll_by_count_and_by_domain(tmp_path):
    trajectories = [small_trajectory(f"t{i}") for i in range(5)] + [small_trajectory("w0", domain="web")]
    _write(tmp_path, trajectories, writer_id="w1", max_rows_per_shard=2)
    terminal = sorted((tmp_path / "domain=terminal").glob("*.parquet"))
    assert [pq.ParquetFile(shard).metadata.num_rows for shard in terminal] == [2, 2, 1]
    assert len(list((tmp_path / "domain=web").glob("*.parquet"))) == 1
    assert len(list((tmp_path / "_manifest").glob("*.json"))) == 4
    read_ids = {t.trajectory_id for t in read_trajectories(str(tmp_path))}
    assert read_ids == {t.trajectory_id for t in trajectories}


def test_shards_roll_by_estimated_bytes(tmp_path):
    big = [small_trajectory(f"t{i}") for i in range(3)]
    for t in big:
        t.steps[0].observation.text = "x" * 5000
    _write(tmp_path, big, max_bytes_per_shard=4000)
    assert len(list((tmp_path / "domain=terminal").glob("*.parquet"))) == 3


def test_torn_writes_are_ignored_and_cleaned(tmp_path):
    _write(tmp_path, [small_trajectory("unlisted")], writer_id="w1")
    # A writer killed after renaming its shard but before its manifest entry, and one killed mid-write.
    (tmp_path / "_manifest" / "part-w1-00000.json").unlink()
    (tmp_path / "domain=terminal" / ".tmp-deadbeef.parquet").write_bytes(b"PAR1 torn")
    _write(tmp_path, [small_trajectory("done")], writer_id="w2")

    assert finished_ids(str(tmp_path)) == {"done"}
    assert [t.trajectory_id for t in read_trajectories(str(tmp_path))] == ["done"]
    with DatasetLock(str(tmp_path)) as lock:
        assert cleanup_temporaries(lock) == 1
    assert not list(tmp_path.rglob(".tmp-*"))
    assert (tmp_path / "domain=terminal" / "part-w1-00000.parquet").exists()  # data is never deleted


def test_reused_writer_id_does_not_overwrite_earlier_shards(tmp_path):
    _write(tmp_path, [small_trajectory("run1")], writer_id="fixed")
    _write(tmp_path, [small_trajectory("run2")], writer_id="fixed")
    assert finished_ids(str(tmp_path)) == {"run1", "run2"}


def test_two_writers_share_a_root(tmp_path):
    first, second = TrajectoryWriter(str(tmp_path)), TrajectoryWriter(str(tmp_path))
    assert first.writer_id != second.writer_id
    for i in range(3):
        first.write(small_trajectory(f"a{i}"))
        second.write(small_trajectory(f"b{i}", domain="swe"))
    first.close()
    second.close()
    assert finished_ids(str(tmp_path)) == {"a0", "a1", "a2", "b0", "b1", "b2"}
    assert len(list((tmp_path / "_manifest").glob("*.json"))) == 2


def test_concurrent_threads_lose_nothing(tmp_path):
    writer = TrajectoryWriter(str(tmp_path), max_rows_per_shard=3)

    def work(prefix: str) -> None:
        for i in range(10):
            writer.write(small_trajectory(f"{prefix}-{i}"))

    threads = [threading.Thread(target=work, args=(f"th{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.close()
    ids = [t.trajectory_id for t in read_trajectories(str(tmp_path))]
    assert len(ids) == 40 and set(ids) == finished_ids(str(tmp_path))


def test_memory_filesystem_root():
    root = f"memory://aw-{uuid.uuid4().hex}/run"
    t = rich_trajectory()
    _write(root, [t, small_trajectory("m2", domain="mcp")])
    assert finished_ids(root) == {t.trajectory_id, "m2"}
    assert sorted(x.trajectory_id for x in read_trajectories(root, validate=True)) == ["m2", t.trajectory_id]
    assert all(path.startswith("memory://") for path in dataset_files(root))
    assert AttachmentStore(root).get(t.initial_observation.attachments[0]) == SCREENSHOT
    fs = fsspec.filesystem("memory")
    assert not [p for p in fs.find(root.removeprefix("memory://")) if "/.tmp-" in p]


def test_unwritable_root_fails_at_construction(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StorageError, match="cannot write to .*choose another --out or fix permissions"):
        TrajectoryWriter(str(blocker / "run"))
    assert blocker.read_text() == "not a directory"


def test_invalid_trajectory_is_refused_before_anything_is_stored(tmp_path):
    t = rich_trajectory()
    t.domain = "cooking"
    with TrajectoryWriter(str(tmp_path)) as writer, pytest.raises(ValidationError, match="domain"):
        writer.write(t)
    assert not (tmp_path / "attachments").exists() and finished_ids(str(tmp_path)) == set()


def test_write_after_close_is_refused(tmp_path):
    writer = _write(tmp_path, [])
    with pytest.raises(StorageError, match="closed"):
        writer.write(small_trajectory("late"))


def test_corrupt_parquet_raises_or_is_skipped(tmp_path, caplog):
    _write(tmp_path / "good", [small_trajectory("ok")])
    bad = tmp_path / "good" / "domain=terminal" / "zz-corrupt.parquet"
    bad.write_bytes(b"PAR1" + b"\x00" * 100 + b"PAR1")
    pattern = str(tmp_path / "good" / "domain=*" / "*.parquet")
    with pytest.raises(StorageError, match="zz-corrupt.parquet"):
        list(read_trajectories(pattern))
    assert [t.trajectory_id for t in read_trajectories(pattern, on_error="skip")] == ["ok"]
    assert "zz-corrupt.parquet" in caplog.text


def test_dataset_without_manifest_reads_every_parquet_file(tmp_path):
    _write(tmp_path, [small_trajectory("a"), small_trajectory("b", domain="web")])
    for entry in (tmp_path / "_manifest").iterdir():
        entry.unlink()
    (tmp_path / "_manifest").rmdir()
    assert sorted(t.trajectory_id for t in read_trajectories(str(tmp_path))) == ["a", "b"]
    with pytest.raises(StorageError, match="no dataset"):
        list(read_trajectories(str(tmp_path / "missing")))


def test_attachments_are_deduplicated_by_hash(tmp_path):
    store = AttachmentStore(str(tmp_path))
    first = store.put(b"same bytes", "a.txt", "text/plain")
    second = store.put(b"same bytes", "b.txt", "text/plain")
    assert first.uri == second.uri and (first.name, second.name) == ("a.txt", "b.txt")
    t1, t2 = rich_trajectory("r1"), rich_trajectory("r2")
    _write(tmp_path, [t1, t2])
    blobs = [p for p in (tmp_path / "attachments").rglob("*") if p.is_file()]
    assert len(blobs) == 3  # "same bytes", SCREENSHOT (used 4 times) and the log


def test_attachment_corruption_is_detected(tmp_path):
    store = AttachmentStore(str(tmp_path))
    stored = store.put(b"payload", "p.bin", "application/octet-stream")
    (tmp_path / stored.uri).write_bytes(b"tampered")
    with pytest.raises(StorageError, match="sha256"):
        store.get(stored)
    with pytest.raises(StorageError, match="cannot read"):
        store.get(Attachment("gone", "text/plain", sha256="0" * 64, uri="attachments/sha256/00/none"))


# -- one writer per root: DatasetLock ---------------------------------------------------------------


def test_local_lock_refuses_a_second_holder_and_names_the_first(tmp_path):
    first = DatasetLock(str(tmp_path / "run")).acquire()
    with pytest.raises(DatasetLockedError, match=rf"in use by another collector \(pid {os.getpid()} on host"):
        DatasetLock(str(tmp_path / "run")).acquire()
    first.release()
    with DatasetLock(str(tmp_path / "run")) as again:
        assert again.held


def test_local_lock_leaves_no_file_and_one_holder_at_a_time(tmp_path):
    """release() removes ROOT/.lock; a contender that opened the old file just before locks the new
    one instead, so threads racing to take and release the lock never hold it together."""
    root = str(tmp_path / "run")
    with DatasetLock(root):
        assert (tmp_path / "run" / ".lock").exists()
    assert not (tmp_path / "run" / ".lock").exists()
    holders, overlaps, entries = [0], [0], [0]
    count = threading.Lock()

    def contend() -> None:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                lock = DatasetLock(root).acquire()
            except DatasetLockedError:
                continue
            with count:
                holders[0] += 1
                entries[0] += 1
                overlaps[0] += holders[0] > 1
            time.sleep(0)
            with count:
                holders[0] -= 1
            lock.release()

    threads = [threading.Thread(target=contend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert entries[0] > 20 and overlaps[0] == 0, (entries, overlaps)
    assert not (tmp_path / "run" / ".lock").exists()


def test_local_lock_dies_with_its_process(tmp_path):
    """The kernel drops a flock when its holder is killed: no stale lock, nothing to clean up."""
    root = str(tmp_path / "run")
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from schemas.lock import DatasetLock; DatasetLock({root!r}).acquire(); "
         "print('held', flush=True); import time; time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    with pytest.raises(DatasetLockedError, match=f"pid {holder.pid} "):
        DatasetLock(root).acquire()
    holder.kill()
    holder.wait()
    DatasetLock(root).acquire().release()


def test_cleanup_of_temporaries_needs_the_lock(tmp_path):
    (tmp_path / ".tmp-x-part.parquet").write_bytes(b"torn")
    lock = DatasetLock(str(tmp_path))
    with pytest.raises(StorageError, match="needs the lock"):
        cleanup_temporaries(lock)
    with lock:
        assert cleanup_temporaries(lock) == 1


def test_object_store_lease_refuses_a_fresh_holder_and_takes_over_a_stale_one():
    root = f"memory://aw-{uuid.uuid4().hex}/run"
    first = DatasetLock(root, settle_s=0).acquire()
    with pytest.raises(DatasetLockedError, match=r"lease was renewed \d+ s ago.*expires in \d+ s"):
        DatasetLock(root, settle_s=0).acquire()
    first.release()
    assert not fsspec.filesystem("memory").exists(root.removeprefix("memory://") + "/.lock")
    # A holder that died without releasing: its heartbeat is older than the ttl.
    dead = {"host": "elsewhere", "pid": 1, "token": "dead", "heartbeat": time.time() - 120}
    fsspec.filesystem("memory").pipe(root.removeprefix("memory://") + "/.lock", json.dumps(dead).encode())
    with DatasetLock(root, settle_s=0) as taker:
        assert taker.held


def test_object_store_lease_notices_when_another_run_takes_it():
    root = f"memory://aw-{uuid.uuid4().hex}/run"
    lock = DatasetLock(root, ttl_s=0.2, settle_s=0).acquire()
    intruder = {"host": "other", "pid": 7, "token": "intruder", "heartbeat": time.time() + 60}
    fsspec.filesystem("memory").pipe(root.removeprefix("memory://") + "/.lock", json.dumps(intruder).encode())
    deadline = time.monotonic() + 5
    while lock.lost is None and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(StorageError, match="lost the lease .* pid 7 on host other"):
        lock.check()
    lock.release()
    assert fsspec.filesystem("memory").exists(root.removeprefix("memory://") + "/.lock"), "not ours to delete"


# -- transient I/O errors are retried, not taken for missing or corrupt data -------------------------


class FlakyFileSystem(LocalFileSystem):
    """Fault injection standing in for an object store's bad moments (no store can run here):
    each of the next `failures[op]` calls of `op` raises the given transient error."""

    protocol = "flaky"
    failures: dict[str, list[OSError]] = {}

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol(str(path).removeprefix("flaky://"))

    def _fail(self, op: str) -> None:
        queue = self.failures.get(op)
        if queue:
            raise queue.pop(0)

    def _open(self, path, mode="rb", **kwargs):
        self._fail("open-" + mode[0])
        return super()._open(path, mode, **kwargs)

    def cat_file(self, path, start=None, end=None, **kwargs):
        self._fail("cat")
        return super().cat_file(path, start, end, **kwargs)

    def glob(self, path, **kwargs):
        self._fail("glob")
        return super().glob(path, **kwargs)


@pytest.fixture
def flaky(tmp_path):
    fsspec.register_implementation("flaky", FlakyFileSystem, clobber=True)
    FlakyFileSystem.failures = {}
    yield f"flaky://{tmp_path}/run", FlakyFileSystem.failures
    FlakyFileSystem.failures = {}


def test_transient_errors_on_commit_and_manifest_reads_are_retried(flaky, caplog):
    root, failures = flaky
    writer = TrajectoryWriter(root, writer_id="w1")
    failures["open-w"] = [TimeoutError("timed out")]  # the attachment blob's write
    writer.write(rich_trajectory("a"))
    failures["open-w"] = [ConnectionResetError(errno.ECONNRESET, "reset"), TimeoutError("timed out")]
    writer.close()
    assert writer.written_ids == {"a"} and not failures["open-w"]
    (back,) = read_trajectories(root)
    assert AttachmentStore(root).get(back.initial_observation.attachments[0]) == SCREENSHOT
    failures["cat"] = [OSError(errno.EIO, "I/O error")]
    failures["glob"] = [ConnectionError("connection dropped")]
    assert finished_ids(root) == {"a"}
    assert "retrying" in caplog.text
    assert not [p for p in Path(root.removeprefix("flaky://")).rglob(".tmp-*")]


def test_errors_that_persist_fail_clearly_instead_of_losing_finished_ids(flaky):
    root, failures = flaky
    _write(root, [small_trajectory("a")])
    failures["cat"] = [OSError(errno.EIO, "I/O error")] * (len(RETRY_DELAYS_S) + 1)
    with pytest.raises(StorageError, match="reading manifest entry .*part-.*json: .*I/O error"):
        finished_ids(root)
    writer = TrajectoryWriter(root)
    writer.write(small_trajectory("b"))
    failures["open-w"] = [TimeoutError("timed out")] * (len(RETRY_DELAYS_S) + 1)
    with pytest.raises(StorageError, match="cannot commit a terminal shard"):
        writer.flush()
    writer.close()  # the rows stayed buffered: the next attempt commits them
    assert finished_ids(root) == {"a", "b"}


def test_permanent_errors_are_not_retried(flaky):
    root, failures = flaky
    _write(root, [small_trajectory("a")])
    failures["cat"] = [PermissionError(errno.EACCES, "denied")]
    started = time.monotonic()
    with pytest.raises(StorageError, match="denied"):
        finished_ids(root)
    assert time.monotonic() - started < RETRY_DELAYS_S[0]

"""Datasets on a real S3-compatible server (moto's server mode on 127.0.0.1): writer, readers,
the lease lock, atomic writes, shard sub-roots and transient-error handling, through s3fs."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from schemas.atomic import atomic_open
from schemas.attachments import AttachmentStore, StorageError
from schemas.lock import DatasetLock, DatasetLockedError
from schemas.storage import (
    TrajectoryWriter,
    cleanup_temporaries,
    dataset_files,
    finished_ids,
    read_trajectories,
)
from tests.schemas.factories import SCREENSHOT, rich_trajectory, small_trajectory
from tests.support_s3 import S3Server, running_s3_server, s3_client, s3_objects

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    with running_s3_server() as started:
        yield started


@pytest.fixture
def bucket(server: S3Server) -> Iterator[str]:
    name = server.bucket()
    with server.use_in_process():
        yield name


def _write(root: str, trajectories: list, **options: object) -> TrajectoryWriter:
    with TrajectoryWriter(root, **options) as writer:
        for t in trajectories:
            writer.write(t)
    return writer


def test_round_trip_with_attachments_and_no_temporary_objects(server: S3Server, bucket: str) -> None:
    root = f"s3://{bucket}/run"
    t = rich_trajectory()
    _write(root, [t, small_trajectory("t2")], writer_id="w1")
    (back, second) = read_trajectories(root, validate=True)
    assert back == t and second.trajectory_id == "t2"
    assert AttachmentStore(root).get(back.initial_observation.attachments[0]) == SCREENSHOT
    assert finished_ids(root) == {t.trajectory_id, "t2"}
    keys = s3_objects(server, bucket)
    assert "run/domain=terminal/part-w1-00000.parquet" in keys and "run/_manifest/part-w1-00000.json" in keys
    # Uploads are atomic on S3: no temporary objects, not even ones created and deleted again.
    assert not [key for key in keys if "/.tmp-" in key], keys
    assert dataset_files(root) == [f"s3://{bucket}/run/domain=terminal/part-w1-00000.parquet"]


def test_readers_see_commits_made_after_this_process_listed_the_root(server: S3Server, bucket: str) -> None:
    root = f"s3://{bucket}/run"
    _write(root, [small_trajectory("a")], writer_id="w1")
    assert finished_ids(root) == {"a"}  # the listing is now in s3fs's cache
    # Another machine commits a shard: its objects arrive behind this process's back (boto3).
    _write(f"s3://{bucket}/elsewhere", [small_trajectory("b")], writer_id="w2")
    client = s3_client(server)
    for kind, name in (("domain=terminal", "part-w2-00000.parquet"), ("_manifest", "part-w2-00000.json")):
        source = {"Bucket": bucket, "Key": f"elsewhere/{kind}/{name}"}
        client.copy_object(Bucket=bucket, Key=f"run/{kind}/{name}", CopySource=source)
    assert finished_ids(root) == {"a", "b"}
    assert sorted(t.trajectory_id for t in read_trajectories(root)) == ["a", "b"]


def test_a_failed_atomic_write_leaves_no_object(server: S3Server, bucket: str) -> None:
    target = f"s3://{bucket}/run/report.json"
    with pytest.raises(RuntimeError, match="mid-write"):
        with atomic_open(target, "w") as out:
            out.write('{"half": ')
            raise RuntimeError("mid-write")
    assert s3_objects(server, bucket) == []
    with atomic_open(target, "w") as out:
        out.write('{"whole": "日本"}')
    body = s3_client(server).get_object(Bucket=bucket, Key="run/report.json")["Body"].read()
    assert json.loads(body) == {"whole": "日本"}


def test_a_large_atomic_write_streams_in_parts_and_a_failed_one_is_aborted(
    server: S3Server, bucket: str
) -> None:
    """Past one part (s3fs's block size) the file goes up as a multipart upload while it is written,
    so memory holds a part, not the file; a failure aborts the upload and leaves no object."""
    part = b"x" * (5 << 20)
    target = f"s3://{bucket}/run/shard.parquet"
    with pytest.raises(RuntimeError, match="mid-write"):
        with atomic_open(target) as out:
            for _ in range(12):  # 60 MiB: more than s3fs's 50 MiB block, so parts are uploaded already
                out.write(part)
            assert out.mpu, "no multipart upload was started"
            raise RuntimeError("mid-write")
    client = s3_client(server)
    assert s3_objects(server, bucket) == []
    assert not client.list_multipart_uploads(Bucket=bucket).get("Uploads")
    with atomic_open(target) as out:
        for _ in range(12):
            out.write(part)
    assert client.head_object(Bucket=bucket, Key="run/shard.parquet")["ContentLength"] == 12 * len(part)


def test_union_of_shard_subroots_with_attachments_in_the_dataset_root(server: S3Server, bucket: str) -> None:
    root = f"s3://{bucket}/run"
    _write(f"{root}/shard-0-of-2", [rich_trajectory("r0")], writer_id="s0", attachments_root=root)
    _write(f"{root}/shard-1-of-2", [small_trajectory("s1")], writer_id="s1", attachments_root=root)
    # A shard file whose manifest entry never came (killed between the two): readers ignore it.
    client = s3_client(server)
    orphan = {"Bucket": bucket, "Key": "run/shard-1-of-2/domain=terminal/part-s1-00000.parquet"}
    client.copy_object(
        Bucket=bucket, Key="run/shard-1-of-2/domain=terminal/part-x-00000.parquet", CopySource=orphan
    )
    assert finished_ids(root) == {"r0", "s1"}
    assert len(dataset_files(root)) == 2
    trajectories = {t.trajectory_id: t for t in read_trajectories(root, validate=True)}
    assert sorted(trajectories) == ["r0", "s1"]
    blob = trajectories["r0"].initial_observation.attachments[0]
    assert AttachmentStore(root).get(blob) == SCREENSHOT  # resolved against the dataset root
    assert not [key for key in s3_objects(server, bucket) if key.startswith("run/shard-0-of-2/attachments")]
    # Each shard sub-root is a dataset of its own as well.
    assert finished_ids(f"{root}/shard-1-of-2") == {"s1"}


def test_cleanup_removes_leftovers_but_not_those_of_shard_subroots(server: S3Server, bucket: str) -> None:
    client = s3_client(server)
    for key in ("run/domain=terminal/.tmp-1-part.parquet", "run/shard-0-of-2/_manifest/.tmp-2-x.json"):
        client.put_object(Bucket=bucket, Key=key, Body=b"torn")
    with DatasetLock(f"s3://{bucket}/run", settle_s=0.05) as lock:
        assert cleanup_temporaries(lock) == 1
    assert s3_objects(server, bucket) == ["run/shard-0-of-2/_manifest/.tmp-2-x.json"]


def test_lease_refuses_a_second_run_and_is_removed_at_release(server: S3Server, bucket: str) -> None:
    root = f"s3://{bucket}/run"
    first = DatasetLock(root, settle_s=0.05).acquire()
    with pytest.raises(DatasetLockedError, match="in use by another collector"):
        DatasetLock(root, settle_s=0.05).acquire()
    first.release()
    assert s3_objects(server, bucket, "run/.lock") == []
    DatasetLock(root, settle_s=0.05).acquire().release()


def test_the_lease_of_a_killed_holder_on_this_host_is_taken_over_at_once(
    server: S3Server, bucket: str
) -> None:
    root = f"s3://{bucket}/run"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from schemas.lock import DatasetLock; DatasetLock({root!r}).acquire();"
         "print('held', flush=True); import time; time.sleep(120)"],
        cwd=ROOT_DIR, env=server.child_env(), stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DatasetLockedError, match=f"pid {holder.pid}"):
            DatasetLock(root, settle_s=0.05).acquire()  # alive: refused
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        started = time.monotonic()
        with DatasetLock(root, settle_s=0.05):  # dead, same pid namespace: no need to wait 60 s
            pass
        assert time.monotonic() - started < 5
    finally:
        holder.kill()
        holder.wait(timeout=10)


def _foreign_lease() -> bytes:
    lease = {"host": "pod-7", "pid": 1, "token": "x", "pid_namespace": "other", "heartbeat": time.time()}
    return json.dumps(lease).encode()


def test_a_fresh_lease_that_is_not_renewed_is_taken_over_after_a_few_beats(
    server: S3Server, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A pod killed on another node leaves a fresh lease; its retry elsewhere must not wait 60 s.
    s3_client(server).put_object(Bucket=bucket, Key="run/.lock", Body=_foreign_lease())
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="schemas.lock"):
        with DatasetLock(f"s3://{bucket}/run", settle_s=0.05, heartbeat_s=0.3) as lock:
            assert lock.held
    assert 0.9 <= time.monotonic() - started < 10  # three silent beats watched, not the 60 s ttl
    assert "taking over the lease" in caplog.text and "pid 1 on host pod-7" in caplog.text


def test_a_lease_renewed_from_another_host_is_respected(server: S3Server, bucket: str) -> None:
    client, stop = s3_client(server), threading.Event()

    def live_holder() -> None:
        while not stop.is_set():
            client.put_object(Bucket=bucket, Key="run/.lock", Body=_foreign_lease())
            stop.wait(0.1)

    holder = threading.Thread(target=live_holder)
    holder.start()
    try:
        with pytest.raises(DatasetLockedError, match="pid 1 on host pod-7"):
            DatasetLock(f"s3://{bucket}/run", settle_s=0.05, heartbeat_s=0.3).acquire()
    finally:
        stop.set()
        holder.join(timeout=10)


def test_an_unreachable_server_is_a_storage_error_after_bounded_retries(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import s3fs

    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)  # s3fs's own retries: 5, ~8 s per call
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with running_s3_server() as doomed:
        name = doomed.bucket()
        with doomed.use_in_process():
            root = f"s3://{name}/run"
            writer = TrajectoryWriter(root, writer_id="w1")
            writer.write(small_trajectory("a"))
            doomed.stop()
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="schemas.storage"):
                with pytest.raises(StorageError, match=f"cannot commit a terminal shard under {root}"):
                    writer.flush()
                with pytest.raises(StorageError, match=f"opening {root}"):
                    finished_ids(root)
            assert time.monotonic() - started < 20
            assert sum("retrying in" in r.getMessage() for r in caplog.records) >= 6

"""build_corpus from s3:// to s3:// on FnApiRunner, against a real local S3 server (moto): the
input is a sharded dataset (two `--shard` sub-roots), the output equals a local build of the same
trajectories file for file, and every output reads back from the bucket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pyarrow.parquet as pq
import pytest

from schemas import TrajectoryWriter, read_trajectories
from tests.beam_pipelines.conftest import FIXTURE
from tests.conftest import build_corpus_in_process
from tests.support_s3 import S3Server, running_s3_server, s3_objects

CORPUS_FILES = (".parquet", ".jsonl")


@pytest.fixture(scope="module")
def server() -> Iterator[S3Server]:
    with running_s3_server() as started:
        yield started


def test_build_corpus_from_s3_to_s3_equals_the_local_build(
    server: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = server.bucket("corpus")
    raw = f"s3://{bucket}/raw"
    recorded = sorted(read_trajectories(str(FIXTURE)), key=lambda t: t.trajectory_id)
    with server.use_in_process():
        for index in range(2):  # what two `--shard i/2` collectors leave behind
            with TrajectoryWriter(f"{raw}/shard-{index}-of-2", attachments_root=raw) as writer:
                for trajectory in recorded[index::2]:
                    writer.write(trajectory)
    with server.use_in_process():
        build_corpus_in_process("--shards", "2", "--input", raw, "--output", f"s3://{bucket}/corpus")
    printed = capsys.readouterr().out
    build_corpus_in_process("--shards", "2", "--input", str(FIXTURE), "--output", str(tmp_path))

    keys = [key.removeprefix("corpus/") for key in s3_objects(server, bucket, "corpus/")]
    local = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert sorted(keys) == local
    assert not [key for key in keys if ".tmp-" in key]
    with server.use_in_process():
        fs = fsspec.filesystem("s3")
        for key in keys:
            if key.endswith(CORPUS_FILES):
                assert fs.cat_file(f"{bucket}/corpus/{key}") == (tmp_path / key).read_bytes(), key
        report = json.loads(fs.cat_file(f"{bucket}/corpus/report.json"))
        packed_rows = sum(
            pq.read_table(fs.open(f"{bucket}/corpus/{key}", "rb")).num_rows
            for key in keys
            if key.startswith("sft/") and key.endswith(".parquet")
        )
        rl_records = sum(
            len(fs.cat_file(f"{bucket}/corpus/{key}").splitlines()) for key in keys if key.startswith("rl/")
        )
    assert packed_rows > 0
    assert rl_records == sum(group["documents"] for group in report["outputs"]["rl"].values()) > 0
    assert f"output: s3://{bucket}/corpus" in printed

"""Shared helpers for the corpus-stage tests.

fixtures/terminal_run was recorded by the real terminal collector:
    python -m collectors.terminal --sandboxes 2 --episodes 12 --max-steps 8 --backend bwrap \
        --out tests/beam_pipelines/fixtures/terminal_run
Tests build their variants (duplicates, planted secrets, corrupt files) from it in tmp dirs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import apache_beam as beam
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from beam_pipelines.stages.park import ParkTrajectories
from schemas import Trajectory, TrajectoryWriter, read_trajectories

FIXTURE = Path(__file__).parent / "fixtures" / "terminal_run"


@pytest.fixture(scope="session")
def recorded() -> list[Trajectory]:
    trajectories = sorted(read_trajectories(str(FIXTURE)), key=lambda t: t.trajectory_id)
    assert len(trajectories) >= 10 and all(t.domain == "terminal" for t in trajectories)
    return trajectories


def pipeline() -> TestPipeline:
    """FnApiRunner, as DESIGN.md prescribes for local runs (DirectRunner tries to download Prism)."""
    return TestPipeline(runner="FnApiRunner")


def variant(
    t: Trajectory, trajectory_id: str, edit: Callable[[Trajectory], None] | None = None
) -> Trajectory:
    """A deep copy of `t` under another id, changed in place by `edit`."""
    copied = copy.deepcopy(replace(t, trajectory_id=trajectory_id))
    if edit is not None:
        edit(copied)
    return copied


def write_dataset(root: Path, trajectories: list[Trajectory]) -> Path:
    with TrajectoryWriter(str(root), writer_id="test") as writer:
        for t in trajectories:
            writer.write(t)
    return root


def ids(pcoll: beam.PCollection, label: str) -> beam.PCollection:
    return pcoll | label >> beam.Map(lambda t: t.trajectory_id)


def reasons(pcoll: beam.PCollection, label: str) -> beam.PCollection:
    """Dead letters as (reason, trajectory_id) pairs."""
    return pcoll | label >> beam.Map(lambda d: (d.reason, d.trajectory_id))


def parked(p: beam.Pipeline, pairs: list[tuple[str, Trajectory]], root: Path) -> beam.PCollection:
    """`Parked` references to (split, trajectory) pairs, as Deduplicate hands them to BuildShards."""
    return p | beam.Create(pairs) | ParkTrajectories(str(root)) | beam.MapTuple(lambda ref, _: ref)


def documents(root: Path, corpus: str) -> dict[str, tuple[list[int], list[int]]]:
    """doc id -> (token ids, loss mask) of every document in the corpus' token shards under `root`."""
    docs = {}
    for f in sorted((root / corpus).rglob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            at = 0
            for doc_id, n in zip(row["doc_ids"], row["doc_lengths"], strict=True):
                docs[doc_id] = (row["input_ids"][at : at + n], row["loss_mask"][at : at + n])
                at += n
    return docs

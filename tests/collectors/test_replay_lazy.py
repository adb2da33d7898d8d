"""The replay policy reads a recording lazily: with a limit it stops before later shards, and it keeps
only the actions of what it read."""

from __future__ import annotations

import copy
import tracemalloc
from pathlib import Path

import pytest

from collectors.policies.replay import ReplayPolicy
from schemas import TrajectoryWriter, read_trajectories
from schemas.storage import StorageError
from tests.schemas.corrupt_recording import FIXTURE, dataset_with_corrupt_tail


def test_a_limit_stops_reading_before_the_corrupt_shards(tmp_path: Path) -> None:
    root, (first_id,) = dataset_with_corrupt_tail(tmp_path / "rec")
    with pytest.raises(StorageError, match="cannot read"):
        ReplayPolicy.from_dataset(str(root))  # the whole dataset does reach the corrupt shards
    policy = ReplayPolicy.from_dataset(str(root), limit=1)
    assert policy.episode_count == 1
    recorded = next(read_trajectories(str(root)))
    assert recorded.trajectory_id == first_id
    assert [spec.task.id for spec in policy.task_specs()] == [recorded.task.id]
    assert policy._episodes[recorded.task.id] == [[s.action for s in recorded.steps]]


def test_loading_holds_actions_not_the_recorded_observations(tmp_path: Path) -> None:
    # 256 recorded episodes with 40 KB screens: 10 MB of observations, 4 batches of 64 rows on disk.
    template = next(read_trajectories(str(FIXTURE)))
    with TrajectoryWriter(str(tmp_path / "rec")) as writer:
        for n in range(256):
            t = copy.deepcopy(template)
            t.trajectory_id = f"{template.trajectory_id}-{n}"
            t.task.metadata["episode"] = n
            for step in t.steps:
                step.observation.text = f"{n:08d}" * 5_000
            writer.write(t)
    observations = 256 * len(template.steps) * 40_000
    tracemalloc.start()
    try:
        policy = ReplayPolicy.from_dataset(str(tmp_path / "rec"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert policy.episode_count == 256
    # Holding every trajectory while grouping them would need all of it; a batch at a time needs a part.
    assert peak < observations / 2, f"peak {peak} bytes loading {observations} bytes of observations"

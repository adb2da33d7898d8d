from __future__ import annotations

from collections import Counter

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.stages.split import SplitTrajectories, split_of
from tests.beam_pipelines.conftest import pipeline, variant


def test_split_of_is_stable_and_follows_the_ratios():
    ratios = (0.8, 0.1, 0.1)
    counts = Counter(split_of(f"task-{i}", ratios, "v1") for i in range(20_000))
    assert abs(counts["train"] / 20_000 - 0.8) < 0.02 and abs(counts["test"] / 20_000 - 0.1) < 0.02
    assert [split_of(f"task-{i}", ratios, "v1") for i in range(50)] == [
        split_of(f"task-{i}", ratios, "v1") for i in range(50)
    ]
    assert [split_of(f"task-{i}", ratios, "v1") for i in range(50)] != [
        split_of(f"task-{i}", ratios, "v2") for i in range(50)
    ]


def test_every_trajectory_of_a_task_lands_in_one_split(recorded):
    repeats = [variant(t, f"{t.trajectory_id}-again") for t in recorded]
    with pipeline() as p:
        out = p | beam.Create(recorded + repeats) | SplitTrajectories(ratios=(0.4, 0.3, 0.3))
        per_task = (
            out
            | "TaskSplit" >> beam.Map(lambda pair: (pair[1].task.id, pair[0]))
            | "Distinct" >> beam.Distinct()
            | "Tasks" >> beam.Keys()
        )
        assert_that(per_task, equal_to([t.task.id for t in recorded]))


def test_rejects_bad_ratios():
    with pytest.raises(ValueError, match="summing to 1"):
        SplitTrajectories(ratios=(0.5, 0.2, 0.2))

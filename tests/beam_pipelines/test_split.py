from __future__ import annotations

from collections import Counter
from dataclasses import replace

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.stages.split import SplitTrajectories, position, split_of
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


RATIOS = (0.6, 0.1, 0.3)  # the demo's


def _tasks(prefix: str, n: int, want_test: bool) -> list[str]:
    """The first `n` task ids `prefix-i` whose hash puts them in test (or not)."""
    found = (f"{prefix}-{i}" for i in range(10_000))
    return [task for task in found if (split_of(task, RATIOS, "v1") == "test") == want_test][:n]


def _trajectories(recorded, domain: str, task_ids: list[str], per_task: int = 2) -> list:
    out = []
    for task_id in task_ids:
        for k in range(per_task):
            t = variant(recorded[0], f"{domain}-{task_id}-{k}")
            t.domain, t.task = domain, replace(t.task, id=task_id)
            out.append(t)
    return out


def _assert_split(trajectories: list, expected: dict[str, str], **kwargs) -> None:
    """The transform, on the real Beam runner, assigns each trajectory id its split in `expected`."""
    with pipeline() as p:
        out = (
            p
            | beam.Create(trajectories)
            | SplitTrajectories(ratios=RATIOS, **kwargs)
            | beam.Map(lambda pair: (pair[1].trajectory_id, pair[0]))
        )
        assert_that(out, equal_to(list(expected.items())))


def test_a_domain_without_test_tasks_gets_its_nearest_task_moved_to_test(recorded):
    os_tasks = _tasks("os", 3, want_test=False)
    terminal = _tasks("term", 2, want_test=False) + _tasks("term", 1, want_test=True)
    lone = _tasks("web", 1, want_test=False)
    trajectories = [
        *_trajectories(recorded, "os", os_tasks),
        *_trajectories(recorded, "terminal", terminal),
        *_trajectories(recorded, "web", lone),
    ]
    by_hash = {t.trajectory_id: split_of(t.task.id, RATIOS, "v1") for t in trajectories}
    assert "test" not in {by_hash[t.trajectory_id] for t in trajectories if t.domain == "os"}

    nearest = max(os_tasks, key=lambda task: position(task, "v1"))
    # both trajectories of the nearest os task move; everything else keeps its hash split
    expected = {
        t.trajectory_id: "test" if t.task.id == nearest else by_hash[t.trajectory_id] for t in trajectories
    }
    assert sum(s == "test" for s in expected.values()) == 2 + 2  # the moved os task, the terminal test task
    # a domain of one task keeps it out of test: its only task is all it can train on
    assert expected[f"web-{lone[0]}-0"] != "test"
    _assert_split(trajectories, expected)
    # the order of the input does not change the choice, and 0 turns the guarantee off
    _assert_split(list(reversed(trajectories)), expected)
    _assert_split(trajectories, by_hash, min_test_per_domain=0)


def test_min_test_per_domain_above_one_never_empties_the_other_splits(recorded):
    os_tasks = sorted(_tasks("os", 3, want_test=False), key=lambda task: position(task, "v1"))
    trajectories = _trajectories(recorded, "os", os_tasks, per_task=1)
    # five wanted, three tasks: the two nearest move, the farthest stays to train on
    expected = {t.trajectory_id: "test" for t in trajectories[1:]}
    expected[trajectories[0].trajectory_id] = split_of(os_tasks[0], RATIOS, "v1")
    _assert_split(trajectories, expected, min_test_per_domain=5)

"""Stage 6: assign each trajectory to train/validation/test by a stable hash of its task id.

The split depends only on (seed, task.id), so every trajectory of a task lands in the same split
on every run and every worker. Decontamination against benchmark files is the next stage
(`beam_pipelines.stages.decontaminate`), which sees each trajectory with its split.

A small corpus can leave a domain without any test task by chance (the demo's os trajectories did),
and then nothing measures the model on that domain. With `min_test_per_domain` (default 1), a domain
of at least two tasks whose hash gives it fewer test tasks than that moves its tasks nearest the test
range (the highest hash positions below it) to test, never its last non-test task. The choice depends
only on the set of (domain, task id) in the input and the seed: a Beam combine per domain over the
distinct tasks, handed to the split as a side input, so every worker sees the same choice.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Iterator

import apache_beam as beam

from beam_pipelines.dead_letter import count
from schemas import Trajectory

STAGE = "split"
SPLITS = ("train", "validation", "test")
TEST = SPLITS[-1]


def position(task_id: str, seed: str) -> float:
    """The task's place in [0, 1): the splits are consecutive ranges of it, in the order of SPLITS."""
    digest = hashlib.sha256(f"{seed}\0{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_of(task_id: str, ratios: tuple[float, ...], seed: str) -> str:
    at = position(task_id, seed)
    bound = 0.0
    for name, ratio in zip(SPLITS, ratios, strict=True):
        bound += ratio
        if at < bound:
            return name
    return SPLITS[-1]  # rounding: ratios summing to 1 - epsilon


# A domain's tasks as the combine sees them: (tasks, tasks the hash puts in test, the `wanted`
# non-test tasks nearest the test range as (position, task id), highest first).
_Tally = tuple[int, int, list[tuple[float, str]]]


class _TestCandidates(beam.CombineFn):
    """Per domain, over its distinct task ids: how many tasks and test tasks, and the nearest others."""

    def __init__(self, ratios: tuple[float, ...], seed: str, wanted: int) -> None:
        self._ratios, self._seed, self._wanted = ratios, seed, wanted

    def create_accumulator(self) -> _Tally:
        return 0, 0, []

    def _nearest(self, candidates: Iterable[tuple[float, str]]) -> list[tuple[float, str]]:
        # ties in position (vanishingly rare) are broken by the task id, so the choice stays stable
        return heapq.nlargest(self._wanted, candidates)

    def add_input(self, tally: _Tally, task_id: str) -> _Tally:
        tasks, tests, nearest = tally
        if split_of(task_id, self._ratios, self._seed) == TEST:
            return tasks + 1, tests + 1, nearest
        return tasks + 1, tests, self._nearest([*nearest, (position(task_id, self._seed), task_id)])

    def merge_accumulators(self, tallies: Iterable[_Tally]) -> _Tally:
        tallies = list(tallies)
        return (
            sum(t[0] for t in tallies),
            sum(t[1] for t in tallies),
            self._nearest(c for t in tallies for c in t[2]),
        )

    def extract_output(self, tally: _Tally) -> list[str]:
        """The task ids to move to test: enough to reach `wanted`, leaving one task out of test."""
        tasks, tests, nearest = tally
        moves = max(0, min(self._wanted - tests, tasks - 1 - tests))
        return [task_id for _, task_id in nearest[:moves]]


class _Split(beam.DoFn):
    def __init__(self, ratios: tuple[float, ...], seed: str) -> None:
        self._ratios, self._seed = ratios, seed

    def process(self, t: Trajectory, moved: dict[str, list[str]]) -> Iterator[tuple[str, Trajectory]]:
        split = split_of(t.task.id, self._ratios, self._seed)
        if split != TEST and t.task.id in moved.get(t.domain, ()):
            split = TEST
            count(STAGE, "moved_to_test")
        count(STAGE, split)
        yield split, t


class SplitTrajectories(beam.PTransform):
    """Trajectory -> (split name, Trajectory).

    ratios: fractions for ("train", "validation", "test"), summing to 1. seed: changes the assignment.
    min_test_per_domain: test tasks each domain of at least two tasks gets, moved from the other splits
    when the hash gives it fewer (0: the hash alone; no effect when the test ratio is 0).
    """

    def __init__(
        self,
        ratios: tuple[float, float, float] = (0.98, 0.01, 0.01),
        seed: str = "v1",
        min_test_per_domain: int = 1,
    ) -> None:
        super().__init__()
        if len(ratios) != len(SPLITS) or min(ratios) < 0 or abs(sum(ratios) - 1.0) > 1e-6:
            raise ValueError(f"ratios must be {len(SPLITS)} fractions >= 0 summing to 1, got {ratios}")
        if min_test_per_domain < 0:
            raise ValueError(f"min_test_per_domain must be >= 0, got {min_test_per_domain}")
        self._ratios, self._seed = tuple(ratios), seed
        # a corpus asked for no test split gets none
        self._min_test = min_test_per_domain if ratios[-1] > 0 else 0

    def expand(self, trajectories: beam.PCollection) -> beam.PCollection:
        if not self._min_test:
            return trajectories | "Split" >> beam.ParDo(_Split(self._ratios, self._seed), moved={})
        moved = (
            trajectories
            | "DomainTasks" >> beam.Map(lambda t: (t.domain, t.task.id))
            | "DistinctTasks" >> beam.Distinct()
            | "NearestToTest" >> beam.CombinePerKey(_TestCandidates(self._ratios, self._seed, self._min_test))
        )
        return trajectories | "Split" >> beam.ParDo(
            _Split(self._ratios, self._seed), moved=beam.pvalue.AsDict(moved)
        )

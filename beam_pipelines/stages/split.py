"""Stage 6: assign each trajectory to train/validation/test by a stable hash of its task id.

The split depends only on (seed, task.id), so every trajectory of a task lands in the same split
on every run and every worker. Decontamination against benchmark files is the next stage
(`beam_pipelines.stages.decontaminate`), which sees each trajectory with its split.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import apache_beam as beam

from beam_pipelines.dead_letter import count
from schemas import Trajectory

STAGE = "split"
SPLITS = ("train", "validation", "test")


def split_of(task_id: str, ratios: tuple[float, ...], seed: str) -> str:
    digest = hashlib.sha256(f"{seed}\0{task_id}".encode()).digest()
    position = int.from_bytes(digest[:8], "big") / 2**64
    bound = 0.0
    for name, ratio in zip(SPLITS, ratios, strict=True):
        bound += ratio
        if position < bound:
            return name
    return SPLITS[-1]  # rounding: ratios summing to 1 - epsilon


class _Split(beam.DoFn):
    def __init__(self, ratios: tuple[float, ...], seed: str) -> None:
        self._ratios, self._seed = ratios, seed

    def process(self, t: Trajectory) -> Iterator[tuple[str, Trajectory]]:
        split = split_of(t.task.id, self._ratios, self._seed)
        count(STAGE, split)
        yield split, t


class SplitTrajectories(beam.PTransform):
    """Trajectory -> (split name, Trajectory).

    ratios: fractions for ("train", "validation", "test"), summing to 1. seed: changes the assignment.
    """

    def __init__(self, ratios: tuple[float, float, float] = (0.98, 0.01, 0.01), seed: str = "v1") -> None:
        super().__init__()
        if len(ratios) != len(SPLITS) or min(ratios) < 0 or abs(sum(ratios) - 1.0) > 1e-6:
            raise ValueError(f"ratios must be {len(SPLITS)} fractions >= 0 summing to 1, got {ratios}")
        self._ratios, self._seed = tuple(ratios), seed

    def expand(self, trajectories: beam.PCollection) -> beam.PCollection:
        return trajectories | "Split" >> beam.ParDo(_Split(self._ratios, self._seed))

"""Paired cluster bootstrap: a confidence interval for the difference between two systems' mean scores.

Both systems are scored on the same turns, so the difference is taken turn by turn (paired): what the
turns have in common (an easy screen, a long listing) cancels out and only the systems' difference is
left. The turns of one trajectory are not independent (one early mistake or one odd sandbox shows in
all its turns), so the resampling unit is the trajectory, never the turn: each resample draws as many
trajectories as there are, with replacement, and takes the mean difference over all their turns.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping
from dataclasses import asdict, dataclass

import numpy as np

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95


@dataclass(frozen=True)
class Difference:
    """mean(a - b) over the paired turns, with its bootstrap interval (None with fewer than two
    trajectories: one cluster says nothing about how trajectories vary)."""

    difference: float
    ci_low: float | None
    ci_high: float | None
    turns: int
    trajectories: int

    @property
    def excludes_zero(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None and (self.ci_low > 0 or self.ci_high < 0)

    def as_dict(self) -> dict:
        return {**asdict(self), "excludes_zero": self.excludes_zero}


def paired_difference(
    a: Mapping[tuple[Hashable, Hashable], float],
    b: Mapping[tuple[Hashable, Hashable], float],
    *,
    weights: Mapping[tuple[Hashable, Hashable], float] | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Difference:
    """The difference a - b. Keys are (trajectory, turn); only turns both systems scored are paired,
    and the trajectory part of the key is the resampling cluster. Percentile interval, fixed seed.
    `weights` (per key, default 1): a weighted mean, e.g. bits per byte weighed by bytes, which makes
    the mean a pooled ratio (total bits over total bytes)."""
    paired = sorted(a.keys() & b.keys(), key=repr)
    if not paired:
        raise ValueError("the two systems share no scored turn: nothing to compare")
    sums: dict[Hashable, float] = defaultdict(float)
    counts: dict[Hashable, float] = defaultdict(float)
    for key in paired:
        weight = 1.0 if weights is None else weights[key]
        sums[key[0]] += weight * (a[key] - b[key])
        counts[key[0]] += weight
    clusters = sorted(sums, key=repr)
    cluster_sums = np.array([sums[c] for c in clusters])
    cluster_counts = np.array([counts[c] for c in clusters])
    mean = float(cluster_sums.sum() / cluster_counts.sum())
    if len(clusters) < 2:
        return Difference(mean, None, None, len(paired), len(clusters))
    drawn = np.random.default_rng(seed).integers(0, len(clusters), size=(resamples, len(clusters)))
    means = cluster_sums[drawn].sum(axis=1) / cluster_counts[drawn].sum(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Difference(mean, float(low), float(high), len(paired), len(clusters))

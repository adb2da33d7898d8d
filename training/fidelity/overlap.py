"""The F1 of an overlap, the one formula the structured fidelity metrics share (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence


def f1(common: int, predicted: int, real: int) -> float:
    """F1 of `common` items among `predicted` and `real` ones; two empty sides agree completely."""
    if not predicted and not real:
        return 1.0
    if not common:
        return 0.0
    p, r = common / predicted, common / real
    return 2 * p * r / (p + r)


def counter_f1(predicted: Counter, real: Counter) -> float:
    return f1(sum((predicted & real).values()), sum(predicted.values()), sum(real.values()))


def multiset_f1(predicted: Sequence[Hashable], real: Sequence[Hashable]) -> float:
    """F1 of the multiset overlap; two empty sequences agree completely."""
    return counter_f1(Counter(predicted), Counter(real))

"""What the accessibility-tree domains (android, os) score the same way: node placement (their nesting
check, shared with the rule verifiers, is in training/observations/trees.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

Box = TypeVar("Box")


def share_placed_close(
    predicted: Iterable[tuple[Hashable, Box]],
    real: Sequence[tuple[Hashable, Box]],
    close: Callable[[Box, Box], bool],
) -> float | None:
    """Of the real (identity, box) nodes that the prediction holds, the share it places `close`;
    nodes of one identity are paired in order (one extra node must not shift every pairing after it).
    None when the real tree places no node."""
    if not real:
        return None
    boxes: dict[Hashable, list[Box]] = defaultdict(list)
    for key, box in predicted:
        boxes[key].append(box)
    taken: dict[Hashable, int] = defaultdict(int)
    within = 0
    for key, box in real:
        if taken[key] < len(boxes[key]):
            within += close(boxes[key][taken[key]], box)
            taken[key] += 1
    return within / len(real)

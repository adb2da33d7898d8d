"""What the accessibility-tree domains (android, os) score the same way: node placement and nesting."""

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


def nests_one_level_at_a_time(depths: Sequence[int]) -> bool:
    """A tree written one node a line: it starts at depth 0 and goes down at most one level a line."""
    if depths and depths[0] != 0:
        return False
    return all(b - a <= 1 for a, b in zip(depths, depths[1:], strict=False))

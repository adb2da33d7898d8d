"""The repetition guard: a reply stops once its tail repeats one block of tokens over and over.

Greedy decoding of a small model often falls into a loop (the same line or phrase again and again) and
then runs to the token bound: seconds of CPU for nothing, and a reply whose observation block never
closes either way. Stopping at the loop saves the time; the reply keeps what it generated so far.

A tail is a loop when it is at least `repeats` copies of a block of `period` tokens and spans at least
`min_span` tokens: a short block must repeat many times (a 2-token block 64 times), a long one 3 times.
Real observations rarely repeat that exactly (screens and trees carry ids, names, counters), but they
can (`yes` fills a screen with "y"): that is why the guard is switchable (GenerationConfig).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LoopDetector:
    min_span: int = 128  # tokens the repeated tail must cover
    repeats: int = 3  # copies of the block at least
    max_period: int = 64  # longest block looked for, in tokens

    @property
    def window(self) -> int:
        """The most tail tokens a check reads: callers may pass only that much."""
        return max(self.repeats * self.max_period, self.min_span + self.max_period)

    def looping(self, tokens: Sequence[int]) -> bool:
        """Whether `tokens` (a reply so far, or at least its last `window` tokens) ends in a loop."""
        tail = list(tokens[-self.window :])
        for period in range(1, self.max_period + 1):
            span = max(self.repeats * period, -(-self.min_span // period) * period)
            # The cheap test first: a tail of period p has its last token p tokens earlier too.
            if span > len(tail) or tail[-1] != tail[-1 - period]:
                continue
            # Periodic with period p <=> the span shifted by p equals itself.
            if tail[-span:-period] == tail[-span + period :]:
                return True
        return False


DEFAULT_DETECTOR = LoopDetector()

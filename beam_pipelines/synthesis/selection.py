"""Which candidate's reasoning a sample keeps: the best-scoring one that passes the threshold and has
reasoning at all. Only the reasoning is kept; the target's observation stays the real one."""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.render import OPEN_TAG

_LEADING_THINK = re.compile(r"\s*<think>(.*?)</think>", re.DOTALL)


def reasoning_of(reply: str) -> str:
    """The text of the reply's leading closed <think> block, else the text before its first
    <predicted_observation> tag; stripped. "" when there is neither (a reply cut short, or one without
    the tag): such a candidate has no reasoning to give."""
    think = _LEADING_THINK.match(reply)
    if think:
        return think.group(1).strip()
    before, tag, _ = reply.partition(OPEN_TAG)
    if not tag or "<think>" in before or "</think>" in before:
        return ""  # no tag, or an unclosed / misplaced think block: nothing that reads as reasoning
    return before.strip()


@dataclass(frozen=True)
class Candidate:
    index: int  # i of seed + i
    reply: str
    score: dict  # the scorer's {"score", "verified", "fidelity", "judge"}

    @property
    def value(self) -> float:
        return float(self.score["score"])

    @property
    def reasoning(self) -> str:
        return reasoning_of(self.reply)


def choose(candidates: list[Candidate], threshold: float) -> Candidate | None:
    """The kept candidate: the highest score >= threshold among those with reasoning; the lowest index
    wins a tie, so the choice does not depend on the order replies arrived in."""
    passing = [c for c in candidates if c.value >= threshold and c.reasoning]
    return max(passing, key=lambda c: (c.value, -c.index), default=None)

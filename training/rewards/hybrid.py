"""The RL reward: an LLM judge's score mixed with the rule verifiers' verdict, judge : rules = 9 : 1 by
default (the weights are the caller's), guarded so that neither can be gamed alone.

The reference system found each part hackable on its own: a policy trained on the judge alone learned to
praise its own output, and rules alone reward any well-formed block. Its fixes, applied here:
- strict tag extraction: a reply that only a lenient reader understands (no block, two blocks, text
  outside the block, reasoning after it) earns nothing from either part;
- content-type scoping: the judge sees only the observation inside the block, never the reasoning, so
  a self-assessment in the reasoning cannot reach it;
- a guard for what a judge may still be fooled by inside the block: commentary or self-evaluation
  (the verifiers' `commentary.*` checks), an empty block where the real observation is not empty, and a
  block that only echoes the agent's action back.
A guarded reply scores 0 in both parts and the judge is not asked.

    score = hybrid_score(domain, reply, reference, action_text, context, judge_backend)
    reward = 0.9 * (score.judge or 0) + 0.1 * score.rules
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from training.backends.base import WorldModelBackend
from training.rewards.judge import judge, sample_score
from training.rewards.verifiers import Failure, verify

GUARDED_PREFIXES = ("extraction.", "commentary.")
ECHO = "guard.echoes_action"
EMPTY = "guard.empty_block"


@dataclass(frozen=True)
class RewardWeights:
    judge: float = 0.9
    rules: float = 0.1

    def __post_init__(self) -> None:
        if self.judge < 0 or self.rules < 0 or self.judge + self.rules <= 0:
            raise ValueError(f"reward weights must be >= 0 and not both 0, got {self}")


@dataclass(frozen=True)
class HybridScore:
    rules: float  # 1.0 when every rule verifier passed
    judge: float | None  # the judge's mean score in [0, 1]; 0 when guarded; None when not asked or unreadable
    guarded: tuple[Failure, ...] = field(default_factory=tuple)  # why the reply earns nothing
    failures: tuple[Failure, ...] = field(default_factory=tuple)  # every rule check that failed
    judge_error: str = ""
    judge_attempts: int = 0  # requests sent to the judge for this reply

    def total(self, weights: RewardWeights) -> float:
        """The weighted reward; a judge that could not score leaves the rules' part alone."""
        return weights.rules * self.rules + weights.judge * (self.judge or 0.0)


def _lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if line.strip()}


def echoes_action(content: str, action_text: str, reference: str) -> bool:
    """The block holds nothing but lines of the action, while the real observation holds more than that."""
    block, action = _lines(content), _lines(action_text)
    return bool(block) and block <= action and not _lines(reference) <= action


def guard_failures(
    failures: Sequence[Failure], content: str | None, reference: str, action_text: str
) -> list:
    """The failures that zero the whole reward (see the module doc)."""
    guarded = [f for f in failures if f.check.startswith(GUARDED_PREFIXES)]
    if content is not None and not content.strip() and reference.strip():
        guarded.append(Failure(EMPTY, "the observation block is empty; the real observation is not"))
    if content is not None and echoes_action(content, action_text, reference):
        guarded.append(Failure(ECHO, "the observation block only repeats the agent's action"))
    return guarded


def hybrid_score(
    domain: str,
    reply: str,
    reference: str,
    action_text: str,
    context: Sequence[dict],
    judge_backend: WorldModelBackend | None = None,
    judge_max_chars: int | None = None,
) -> HybridScore:
    """Score one reply to the world-model prompt `context` whose real answer was `reference`. Without a
    `judge_backend` only the rules are scored (`judge` is None). `judge_max_chars` cuts each text the judge
    is shown (the judge's own default when None): a small judge's context is short."""
    verdict = verify(domain, reply, reference)
    guarded = guard_failures(verdict.failures, verdict.content, reference, action_text)
    rules = 0.0 if guarded else float(verdict.ok)
    if guarded:
        return HybridScore(rules, 0.0 if judge_backend else None, tuple(guarded), verdict.failures)
    if judge_backend is None:
        return HybridScore(rules, None, (), verdict.failures)
    result = judge(
        judge_backend,
        domain=domain,
        context=context,
        reference=reference,
        prediction=verdict.content,
        max_chars=judge_max_chars,
    )
    mean = sample_score(result.percent)
    return HybridScore(
        rules,
        None if mean is None else mean / 100,
        (),
        verdict.failures,
        judge_error=result.error,
        judge_attempts=result.attempts,
    )

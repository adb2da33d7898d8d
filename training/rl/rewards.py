"""The hybrid reward (training/rewards/hybrid.py) as TRL reward functions.

GRPOTrainer calls each reward function with the batch's prompts and completions and the dataset's other
columns (`domain`, `reference`, `action_text`, `sample_id`), logs each one's mean as
`rewards/<name>/mean`, and sums them with `GRPOConfig.reward_weights`. The two functions here, `rules`
and `judge`, share one scoring pass per batch: the judge requests run concurrently, and the guard
(which zeroes both parts of a hacked reply) is decided once.

A judge that could not score a reply (after its bounded retries) must not punish the policy. TRL turns a
missing value into NaN and sums the weighted parts with `nansum`, so NaN alone would count as a judge
score of 0: 90% of the reward lost at the default weights. GRPO only uses a reward relative to the other
completions of the same prompt, so a missing score takes the mean judge score of those siblings that
were scored: the judge part then moves that completion's advantage neither way. Where no sibling was
scored the whole group is NaN alike, which leaves the group's advantages to the rules. Each step logs
the share of missing scores (`judge_missing`) and the judge requests per reply (`judge_attempts`).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from training.backends.base import WorldModelBackend
from training.rewards.hybrid import HybridScore, RewardWeights, hybrid_score


def completion_text(completion: Any) -> str:
    """A TRL completion as text: conversational ones are a list holding the assistant message."""
    if isinstance(completion, list):
        return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")
    return str(completion)


def fill_missing_from_siblings(scores: list[float | None], groups: list) -> list[float]:
    """Each None replaced by the mean of the scored entries of its group (the completions of one prompt),
    or NaN where none of its group was scored (see the module doc)."""
    scored: dict[Any, list[float]] = {}
    for score, group in zip(scores, groups, strict=True):
        if score is not None:
            scored.setdefault(group, []).append(score)
    means = {group: sum(values) / len(values) for group, values in scored.items()}
    return [
        score if score is not None else means.get(group, math.nan)
        for score, group in zip(scores, groups, strict=True)
    ]


class HybridRewards:
    """`reward_functions()` for GRPOTrainer's `reward_funcs`, `weights()` for `reward_weights`; without a
    judge backend, the rules-only reward."""

    def __init__(
        self,
        weights: RewardWeights,
        judge_backend: WorldModelBackend | None = None,
        concurrency: int = 8,
        judge_max_chars: int | None = None,
    ) -> None:
        if weights.judge > 0 and judge_backend is None:
            raise ValueError(
                "a judge weight above 0 needs a judge endpoint (--judge-url), or use --reward rules"
            )
        self.weights = weights
        self._judge = judge_backend
        self._judge_max_chars = judge_max_chars
        self._pool = ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="reward")
        self._batch: tuple = ()
        self._scores: list[HybridScore] = []

    def reward_functions(self) -> list:
        return [self.judge, self.rules] if self._judge is not None else [self.rules]

    def reward_weights(self) -> list[float]:
        return [self.weights.judge, self.weights.rules] if self._judge is not None else [1.0]

    def score_batch(self, prompts: list, completions: list, **columns: Any) -> list[HybridScore]:
        """Every completion's score, computed once per batch whichever function asks first."""
        texts = [completion_text(c) for c in completions]
        key = (tuple(columns["sample_id"]), tuple(texts))
        if key != self._batch:
            work = zip(
                columns["domain"], texts, columns["reference"], columns["action_text"], prompts, strict=True
            )
            self._scores = list(
                self._pool.map(lambda args: hybrid_score(*args, self._judge, self._judge_max_chars), work)
            )
            self._batch = key
            log_metric = columns.get("log_metric")
            if log_metric is not None:
                n = len(self._scores)
                log_metric("guarded", sum(bool(s.guarded) for s in self._scores) / n)
                if self._judge is not None:
                    log_metric("judge_missing", sum(s.judge is None for s in self._scores) / n)
                    log_metric("judge_attempts", sum(s.judge_attempts for s in self._scores) / n)
        return self._scores

    def rules(self, prompts: list, completions: list, **columns: Any) -> list[float]:
        return [s.rules for s in self.score_batch(prompts, completions, **columns)]

    def judge(self, prompts: list, completions: list, **columns: Any) -> list[float]:
        scores = [s.judge for s in self.score_batch(prompts, completions, **columns)]
        return fill_missing_from_siblings(scores, columns["sample_id"])

    def close(self) -> None:
        self._pool.shutdown(wait=True)

"""Synthesis: a teacher's reasoning in front of each SFT target's real observation (off by default).

For every SFT sample the teacher is asked for k candidate replies to the sample's own prompt messages
(candidate i with seed + i). Each reply is scored against the real observation by the scorer plugin
(`--synthesis-scorer`, default the project's `training.rewards.candidates:score`, loaded by name on the
worker because beam_pipelines may not import training). The best candidate that passes the threshold
and has reasoning gives its reasoning to the target, `<think>` block first; the observation stays the
real one. A sample without such a candidate leaves the SFT corpus, to the dead letter.

The shard builder (`beam_pipelines.stages.shards`) hands over the SFT samples of a chunk of trajectories
at a time: the chunk's k x samples requests go through one thread pool, so a remote teacher sees
`--synthesis-concurrency` requests in flight per worker. Replies are cached (`synthesis.cache`) as each
sample's requests finish, so a killed or repeated build asks only for what it lacks. A request that
still fails after its retries is a failed candidate, counted, never a failed pipeline.

Counters per domain (`synthesis/<domain>.<name>`): kept, dropped, candidates (replies scored), cached
(of those, read from the cache), requests (sent), failed_requests.
"""

from __future__ import annotations

import importlib
import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace

from beam_pipelines import dead_letter
from beam_pipelines.dead_letter import DeadLetter
from beam_pipelines.stages.common import Sample
from beam_pipelines.synthesis.cache import Replies, ReplyCache, cache_key
from beam_pipelines.synthesis.selection import Candidate, choose
from beam_pipelines.synthesis.settings import SynthesisConfig
from beam_pipelines.synthesis.teacher import make_teacher
from schemas.records import Observation
from schemas.render import CLOSE_TAG, OPEN_TAG, target_text

STAGE = "synthesis"
Scorer = Callable[..., dict]

log = logging.getLogger(__name__)


def load_scorer(spec: str) -> Scorer:
    """The function `MODULE:FUNCTION` names: score(domain, messages, reference, reply, *, judge_url)."""
    module_name, _, function = spec.partition(":")
    if not module_name or not function:
        raise ValueError(
            f"--synthesis-scorer {spec!r}: give MODULE:FUNCTION, e.g. training.rewards.candidates:score"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"--synthesis-scorer {spec!r}: cannot import {module_name} ({exc}); the project's scorer needs "
            "the training extra on the workers: pip install '.[corpus,training]'"
        ) from exc
    scorer = getattr(module, function, None)
    if not callable(scorer):
        raise ValueError(f"--synthesis-scorer {spec!r}: {module_name} has no function {function}")
    return scorer


def real_observation(target: str) -> str:
    """The observation text of a reasoning-free SFT target (`schemas.render.target_text`)."""
    head, tail = f"{OPEN_TAG}\n", f"\n{CLOSE_TAG}"
    if not (target.startswith(head) and target.endswith(tail)):
        raise ValueError("synthesis expects an SFT target without reasoning: <predicted_observation>...")
    return target[len(head) : -len(tail)]


@dataclass
class _Pending:
    """One sample's candidates on their way: cached replies, then the requests' answers."""

    sample: Sample
    reference: str
    key: str
    replies: Replies
    asked: int = 0  # requests still in flight
    fresh: bool = False  # a request answered: the cache entry needs writing
    scores: dict[int, dict] = field(default_factory=dict)


class Synthesizer:
    """Lives on a worker (made in the shard builder's setup): the teacher, the scorer, the cache and
    the thread pool, shared by every chunk that worker formats."""

    def __init__(self, config: SynthesisConfig) -> None:
        if config.cache is None:
            raise ValueError(
                "SynthesisConfig.cache must be set (parse_args defaults it to OUTPUT/synthesis_cache)"
            )
        self._config = config
        self._scorer = load_scorer(config.scorer)
        self._teacher = make_teacher(config)
        self._cache = ReplyCache(config.cache, config.k)
        self._pool = ThreadPoolExecutor(config.concurrency, thread_name_prefix="synthesis")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._teacher.close()

    def synthesize(self, samples: list[Sample]) -> tuple[list[Sample], list[DeadLetter]]:
        """The samples that kept a teacher's reasoning (in their order), and a dead letter for each other."""
        counts: Counter[str] = Counter()
        pending = [self._pending(s) for s in samples]
        futures = self._ask(pending, counts)
        for p in pending:  # scored while the requests run
            for i, reply in enumerate(p.replies):
                if reply is not None:
                    counts[f"{p.sample.domain}.cached"] += 1
                    p.scores[i] = self._score(p, reply)
        errors: Counter[str] = Counter()
        for future in as_completed(futures):
            p, i = futures[future]
            p.asked -= 1
            try:
                p.replies[i] = future.result()
            except Exception as exc:  # the teacher's failure is this candidate's, never the pipeline's
                errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
                counts[f"{p.sample.domain}.failed_requests"] += 1
            else:
                p.fresh = True
                p.scores[i] = self._score(p, p.replies[i])
            if p.asked == 0 and p.fresh:
                self._cache.put(p.key, p.replies)
        if errors:
            log.warning(
                "synthesis: %d requests failed after retries, e.g. %s",
                errors.total(),
                errors.most_common(1)[0][0],
            )
        kept, dead = self._select(pending, counts)
        for name, n in sorted(counts.items()):
            dead_letter.count(STAGE, name, n)
        return kept, dead

    def _pending(self, sample: Sample) -> _Pending:
        key = cache_key(sample.messages or (), self._config)
        return _Pending(sample, real_observation(sample.text), key, self._cache.get(key))

    def _ask(self, pending: list[_Pending], counts: Counter[str]) -> dict[Future, tuple[_Pending, int]]:
        c = self._config
        futures: dict[Future, tuple[_Pending, int]] = {}
        for p in pending:
            for i, reply in enumerate(p.replies):
                if reply is None:
                    future = self._pool.submit(
                        self._teacher.complete,
                        p.sample.messages or (),
                        seed=c.seed + i,
                        temperature=c.temperature,
                        max_tokens=c.max_tokens,
                    )
                    futures[future] = (p, i)
                    p.asked += 1
                    counts[f"{p.sample.domain}.requests"] += 1
        return futures

    def _score(self, p: _Pending, reply: str) -> dict:
        s = p.sample
        return self._scorer(
            s.domain, list(s.messages or ()), p.reference, reply, judge_url=self._config.judge
        )

    def _select(self, pending: list[_Pending], counts: Counter[str]) -> tuple[list[Sample], list[DeadLetter]]:
        kept: list[Sample] = []
        dead: list[DeadLetter] = []
        for p in pending:
            domain = p.sample.domain
            candidates = [Candidate(i, p.replies[i], score) for i, score in sorted(p.scores.items())]  # type: ignore[arg-type]
            counts[f"{domain}.candidates"] += len(candidates)
            best = choose(candidates, self._config.threshold)
            if best is not None:
                counts[f"{domain}.kept"] += 1
                text = target_text(Observation("", p.reference), best.reasoning)
                kept.append(replace(p.sample, text=text))
                continue
            counts[f"{domain}.dropped"] += 1
            top = max((c.value for c in candidates), default=None)
            detail = (
                f"best score {top:.3f} of {len(candidates)} scored candidates (k={self._config.k}), "
                f"threshold {self._config.threshold}, or no reasoning in any passing candidate"
                if top is not None
                else f"no candidate of {self._config.k} was answered: every request failed"
            )
            dead.append(DeadLetter(STAGE, "no_candidate_passed", detail, "", p.sample.doc_id))
        return kept, dead

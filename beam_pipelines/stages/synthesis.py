"""Synthesis: a teacher's reasoning in front of each SFT target's real observation (off by default).

For every SFT sample the teacher is asked for k candidate replies to the sample's own prompt messages
(candidate i with seed + i). Each reply is scored against the real observation by the scorer plugin
(`--synthesis-scorer`: the name of a scorer registered in the `agentworld.synthesis_scorers` entry point
group, by default the project's `candidates` (training/candidates.py), or MODULE:FUNCTION; loaded on the
worker, because beam_pipelines may not import training). The best candidate that passes the threshold
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
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from importlib import metadata

from beam_pipelines import dead_letter
from beam_pipelines.dead_letter import DeadLetter
from beam_pipelines.stages.common import Sample
from beam_pipelines.synthesis.cache import Replies, ReplyCache, cache_key
from beam_pipelines.synthesis.selection import Candidate, choose
from beam_pipelines.synthesis.settings import SCORER_GROUP, SynthesisConfig
from beam_pipelines.synthesis.teacher import make_teacher
from schemas.records import Observation
from schemas.render import CLOSE_TAG, OPEN_TAG, target_text

STAGE = "synthesis"
Scorer = Callable[..., dict]

log = logging.getLogger(__name__)


def load_scorer(spec: str) -> Scorer:
    """The scorer `spec` names, score(domain, messages, reference, reply, *, judge_url): a scorer
    registered in the entry point group SCORER_GROUP by its name, or any function as MODULE:FUNCTION."""
    if ":" not in spec:
        return _registered_scorer(spec)
    module_name, _, function = spec.partition(":")
    if not module_name or not function:
        raise ValueError(f"--synthesis-scorer {spec!r}: give a registered scorer's name or MODULE:FUNCTION")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"--synthesis-scorer {spec!r}: cannot import {module_name} ({exc})") from exc
    scorer = getattr(module, function, None)
    if not callable(scorer):
        raise ValueError(f"--synthesis-scorer {spec!r}: {module_name} has no function {function}")
    return scorer


def _registered_scorer(name: str) -> Scorer:
    found = metadata.entry_points(group=SCORER_GROUP, name=name)
    if not found:
        installed = sorted(ep.name for ep in metadata.entry_points(group=SCORER_GROUP))
        raise ValueError(
            f"--synthesis-scorer {name!r}: no scorer of that name in entry point group {SCORER_GROUP!r} "
            f"(installed: {', '.join(installed) or 'none'}); give one of those or MODULE:FUNCTION. The "
            "project's scorer is registered by its distribution: pip install -e '.[corpus,training]'"
        )
    try:
        return next(iter(found)).load()
    except ImportError as exc:
        raise ImportError(
            f"--synthesis-scorer {name!r}: cannot load it ({exc}); the project's scorer needs the training "
            "extra on the workers: pip install '.[corpus,training]'"
        ) from exc


def real_observation(target: str) -> str:
    """The observation text of a reasoning-free SFT target (`schemas.render.target_text`)."""
    head, tail = f"{OPEN_TAG}\n", f"\n{CLOSE_TAG}"
    if not (target.startswith(head) and target.endswith(tail)):
        raise ValueError("synthesis expects an SFT target without reasoning: <predicted_observation>...")
    return target[len(head) : -len(tail)]


@dataclass
class _Prompt:
    """One distinct prompt of a chunk: its k replies, cached ones first, then the requests' answers.
    Samples with the same prompt (first turns of one task, often) share it: asked once, cached once."""

    key: str
    messages: tuple[dict, ...]
    domain: str
    replies: Replies
    asked: int = 0  # requests still in flight
    fresh: bool = False  # a request answered: the cache entry needs writing


@dataclass
class _Pending:
    """One sample: its prompt's candidates, scored against its own real observation."""

    sample: Sample
    reference: str
    prompt: _Prompt
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
        prompts: dict[str, _Prompt] = {}
        pending: list[_Pending] = []
        for sample in samples:
            messages = sample.messages or ()
            key = cache_key(messages, self._config)
            if key not in prompts:
                prompts[key] = _Prompt(key, messages, sample.domain, self._cache.get(key))
            pending.append(_Pending(sample, real_observation(sample.text), prompts[key]))
        futures = self._ask(list(prompts.values()), counts)
        sharing: dict[str, list[_Pending]] = defaultdict(list)
        for p in pending:  # the cached candidates are scored while the requests run
            sharing[p.prompt.key].append(p)
            for i, reply in enumerate(p.prompt.replies):
                if reply is not None:
                    counts[f"{p.sample.domain}.cached"] += 1
                    p.scores[i] = self._score(p, reply)
        errors: Counter[str] = Counter()
        for future in as_completed(futures):
            prompt, i = futures[future]
            prompt.asked -= 1
            try:
                reply = future.result()
            except Exception as exc:  # the teacher's failure is this candidate's, never the pipeline's
                errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
                counts[f"{prompt.domain}.failed_requests"] += 1
            else:
                prompt.replies[i], prompt.fresh = reply, True
                for p in sharing[prompt.key]:
                    p.scores[i] = self._score(p, reply)
            if prompt.asked == 0 and prompt.fresh:
                self._cache.put(prompt.key, prompt.replies)
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

    def _ask(self, prompts: list[_Prompt], counts: Counter[str]) -> dict[Future, tuple[_Prompt, int]]:
        c = self._config
        futures: dict[Future, tuple[_Prompt, int]] = {}
        for prompt in prompts:
            for i, reply in enumerate(prompt.replies):
                if reply is None:
                    future = self._pool.submit(
                        self._teacher.complete,
                        prompt.messages,
                        seed=c.seed + i,
                        temperature=c.temperature,
                        max_tokens=c.max_tokens,
                    )
                    futures[future] = (prompt, i)
                    prompt.asked += 1
                    counts[f"{prompt.domain}.requests"] += 1
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
            replies = p.prompt.replies
            candidates = [Candidate(i, replies[i], score) for i, score in sorted(p.scores.items())]  # type: ignore[arg-type]
            counts[f"{domain}.candidates"] += len(candidates)
            best = choose(candidates, self._config.threshold)
            if best is not None:
                counts[f"{domain}.kept"] += 1
                text = target_text(Observation("", p.reference), best.reasoning)
                kept.append(replace(p.sample, text=text))
                continue
            counts[f"{domain}.dropped"] += 1
            dead.append(DeadLetter(STAGE, "no_candidate_passed", self._why(candidates), "", p.sample.doc_id))
        return kept, dead

    def _why(self, candidates: list[Candidate]) -> str:
        k, threshold = self._config.k, self._config.threshold
        if not candidates:
            return f"no candidate of {k} was answered: every request failed"
        top = max(c.value for c in candidates)
        why = (
            f"below the threshold {threshold}"
            if top < threshold
            else "but no passing candidate has reasoning"
        )
        return f"best score {top:.3f} of {len(candidates)} answered candidates (k={k}) {why}"

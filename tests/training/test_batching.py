"""Dynamic request batching: the generic batcher with a controllable batch function, and the local
transformers backend batching a real tiny Qwen3 (random init, the real Qwen3 tokenizer) on CPU.

The batcher tests hold the worker inside a batch with an Event, so which requests queue behind it,
and therefore how they are batched, is certain rather than a matter of thread timing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
import torch
from transformers import Qwen3ForCausalLM

from schemas import read_trajectories
from schemas.render import chat_messages
from tests.training.conftest import TERMINAL_RUN
from training.backends import make_backend
from training.backends.base import GenerationConfig
from training.backends.batching import BatcherClosed, DynamicBatcher
from training.backends.transformers_local import TransformersBackend, _Prompt
from training.fidelity.teacher_forced import fits_chars
from training.models import qwen3_config
from training.tokenizer import load_tokenizer


class Gate:
    """A batch function that records its batches and holds the first one until `release()`."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str]]] = []
        self.entered = threading.Event()
        self.released = threading.Event()

    def __call__(self, items: Sequence[tuple[str, str]]) -> list[str]:
        self.batches.append(list(items))
        self.entered.set()
        self.released.wait(timeout=30)
        return [f"{key}:{value}" for key, value in items]

    def release(self) -> None:
        self.released.set()


def submit_async(batcher: DynamicBatcher, key: str, value: str) -> Future:
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(batcher.submit((key, value), key=key))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return future


def wait_until(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def queued(batcher: DynamicBatcher) -> int:
    with batcher._cond:
        return len(batcher._queue)


# --- the batcher ---------------------------------------------------------------------------------


def test_requests_with_different_keys_never_share_a_batch() -> None:
    gate = Gate()
    batcher = DynamicBatcher(gate, max_batch=3, wait_s=0.01)
    first = submit_async(batcher, "a", "0")
    assert gate.entered.wait(10)
    # Behind the running batch: a, b, a, b, a, a (oldest first); a batch holds at most 3.
    futures = [submit_async(batcher, key, str(n)) for n, key in enumerate("ababaa", start=1)]
    wait_until(lambda: queued(batcher) == 6)
    gate.release()
    assert first.result(10) == "a:0"
    assert [f.result(10) for f in futures] == [f"{k}:{n}" for n, k in enumerate("ababaa", start=1)]
    keys = [{key for key, _ in batch} for batch in gate.batches]
    assert all(len(k) == 1 for k in keys), f"mixed keys in one batch: {gate.batches}"
    assert [len(b) for b in gate.batches] == [1, 3, 2, 1], "the oldest request's key goes first, 3 at most"
    assert batcher.stats.as_dict()["largest"] == 3
    batcher.close()


def test_close_fails_queued_requests_finishes_the_running_one_and_refuses_new_ones() -> None:
    gate = Gate()
    batcher = DynamicBatcher(gate, max_batch=4, wait_s=0.01)
    running = submit_async(batcher, "a", "running")
    assert gate.entered.wait(10)
    pending = [submit_async(batcher, "a", str(n)) for n in range(3)]
    wait_until(lambda: queued(batcher) == 3)
    closer = threading.Thread(target=batcher.close)
    closer.start()
    for future in pending:
        with pytest.raises(BatcherClosed, match="closed before this request ran"):
            future.result(10)
    assert closer.is_alive(), "close waits for the running batch"
    gate.release()
    closer.join(10)
    assert running.result(10) == "a:running"
    with pytest.raises(BatcherClosed, match="is closed"):
        batcher.submit(("a", "late"), key="a")


def test_a_failing_batch_fails_its_callers_and_the_worker_goes_on() -> None:
    def run(items: Sequence[str]) -> list[str]:
        if "bad" in items:
            raise ValueError("cannot do bad")
        return [item.upper() for item in items]

    batcher = DynamicBatcher(run, max_batch=1, wait_s=0)
    with pytest.raises(ValueError, match="cannot do bad"):
        batcher.submit("bad")
    assert batcher.submit("good") == "GOOD"
    batcher.close()


def test_a_lone_caller_does_not_wait_and_an_idle_worker_ends() -> None:
    batcher = DynamicBatcher(lambda items: list(items), max_batch=16, wait_s=5.0, idle_s=0.2)
    started = time.monotonic()
    assert [batcher.submit(n) for n in range(3)] == [0, 1, 2]
    assert time.monotonic() - started < 2.0, "one caller at a time must not wait for batch-mates"
    wait_until(lambda: batcher._worker is None)
    assert batcher.submit(7) == 7, "a new worker starts with the next request"
    batcher.close()
    with pytest.raises(ValueError):
        DynamicBatcher(lambda items: list(items), max_batch=0)


# --- the transformers backend --------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny() -> Iterator[TransformersBackend]:
    """qwen3-tiny's shape with its own output layer: with tied embeddings a random model just repeats
    the prompt's last token, the same for every prompt, which would hide a padding bug."""
    config = qwen3_config("qwen3-tiny", tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = Qwen3ForCausalLM(config)
    backend = TransformersBackend(model, load_tokenizer(), max_batch=16, batch_wait_ms=200)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def prompts() -> list[list[dict]]:
    """Teacher-forced prompts of real recorded terminal turns: 8 lengths, so the batch is left-padded."""
    trajectory = next(iter(read_trajectories(str(TERMINAL_RUN))))
    return [chat_messages(trajectory, k, fits=fits_chars(2000)) for k in range(1, 9)]


GREEDY = GenerationConfig(max_new_tokens=12)


def test_one_batched_generate_gives_each_prompt_its_unbatched_greedy_reply(tiny, prompts) -> None:
    batch = [_Prompt(tiny._prompt_ids(m), GREEDY) for m in prompts]
    assert len({len(p.ids) for p in batch}) >= 4, "the prompts should differ in length"
    alone = [tiny._generate([p])[0] for p in batch]
    assert tiny._generate(batch) == alone
    assert len(set(alone)) > 1, "different prompts should get different replies"
    # Seeded sampling draws per row, so a sampled reply does not depend on its batch-mates either.
    sampled = [_Prompt(p.ids, GenerationConfig(max_new_tokens=8, temperature=1.0, seed=3)) for p in batch]
    assert tiny._generate(sampled) == [tiny._generate([p])[0] for p in sampled]


def test_sixteen_concurrent_callers_are_all_answered_in_batches(tiny, prompts) -> None:
    requests = [prompts[n % len(prompts)] for n in range(16)]
    expected = {id(m): tiny.complete(m, GREEDY) for m in prompts}
    before = tiny.batch_stats
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(lambda m: tiny.complete(m, GREEDY), requests))
    assert replies == [expected[id(m)] for m in requests]
    after = tiny.batch_stats
    assert after["requests"] - before["requests"] == 16
    assert after["batches"] - before["batches"] < 16 and after["largest"] > 1, "requests should share batches"


def test_concurrent_calls_with_different_configs_each_get_their_own_reply(tiny, prompts) -> None:
    sampled = GenerationConfig(max_new_tokens=5, temperature=1.0, seed=2)
    configs = [GREEDY, GenerationConfig(max_new_tokens=5), sampled]
    work = [(m, c) for m in prompts[:4] for c in configs]
    expected = [tiny.complete(m, c) for m, c in work]
    with ThreadPoolExecutor(len(work)) as pool:
        assert list(pool.map(lambda mc: tiny.complete(*mc), work)) == expected
    assert expected[0].startswith(expected[1]), "greedy: the 5-token reply begins the 12-token one"


def test_a_closed_backend_says_so(prompts) -> None:
    backend = make_backend("qwen3-tiny")
    assert isinstance(backend.complete(prompts[0], GenerationConfig(max_new_tokens=2)), str)
    backend.close()
    with pytest.raises(BatcherClosed, match="closed"):
        backend.complete(prompts[0], GenerationConfig(max_new_tokens=2))

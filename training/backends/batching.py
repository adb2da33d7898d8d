"""Dynamic request batching: concurrent callers' requests are run together, one batch at a time.

A model that decodes one token per step for a whole batch in about the time it takes for one sequence
(the weights are read once per step, whatever the batch size) serves N concurrent callers nearly N
times faster if their requests share the steps. That is what vLLM and SGLang do on a GPU; this is the
small in-process version for a model that one thread drives.

Callers block in `submit`; a single worker thread takes the oldest request, waits up to `wait_s` for
more requests with the same key (requests with different keys never share a batch), and runs them with
one call of `run_batch`. The wait ends early once every caller that has been active lately is queued,
so one caller alone (concurrency 1) never waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class BatcherClosed(RuntimeError):
    """The batcher was closed before (or while) the request ran."""


@dataclass
class _Request(Generic[Item, Result]):
    item: Item
    key: Hashable
    caller: int
    future: Future[Result] = field(default_factory=Future)


@dataclass
class BatchStats:
    batches: int = 0
    requests: int = 0
    largest: int = 0

    def as_dict(self) -> dict:
        mean = self.requests / self.batches if self.batches else 0.0
        return {
            "batches": self.batches,
            "requests": self.requests,
            "largest": self.largest,
            "mean_size": round(mean, 2),
        }


class DynamicBatcher(Generic[Item, Result]):
    """Runs `run_batch(items) -> results` (same order, same length) for batches of submitted items.

    The worker thread starts with the first request and ends after `idle_s` without any, so a batcher
    that nobody closes does not hold its thread (and what `run_batch` references) for ever.
    """

    def __init__(
        self,
        run_batch: Callable[[Sequence[Item]], Sequence[Result]],
        *,
        max_batch: int = 16,
        wait_s: float = 0.005,
        idle_s: float = 30.0,
        recent_s: float = 1.0,
        name: str = "batcher",
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        if wait_s < 0:
            raise ValueError(f"the batch wait must not be negative, not {wait_s}")
        self._run_batch = run_batch
        self.max_batch = max_batch
        self.wait_s = wait_s
        self._idle_s = idle_s
        # A caller answered within `recent_s` is probably about to ask again (a thread pool's next item):
        # it is worth waiting for, up to `wait_s`.
        self._recent_s = recent_s
        self._name = name
        self._cond = threading.Condition()
        self._queue: list[_Request[Item, Result]] = []
        self._answered: dict[int, float] = {}  # caller thread -> when its last reply was handed over
        self._worker: threading.Thread | None = None
        self._closed = False
        self.stats = BatchStats()

    def submit(self, item: Item, key: Hashable = None) -> Result:
        """The result of `item`, computed in a batch with other callers' items of the same `key`."""
        caller = threading.get_ident()
        request: _Request[Item, Result] = _Request(item, key, caller)
        with self._cond:
            if self._closed:
                raise BatcherClosed(f"{self._name} is closed")
            self._answered.pop(caller, None)
            self._queue.append(request)
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._worker.start()
            self._cond.notify_all()
        return request.future.result()

    def close(self) -> None:
        """Stop the worker after its current batch; queued requests fail with `BatcherClosed`."""
        with self._cond:
            self._closed = True
            pending, self._queue = self._queue, []
            worker = self._worker
            self._cond.notify_all()
        for request in pending:
            request.future.set_exception(BatcherClosed(f"{self._name} was closed before this request ran"))
        if worker is not None and worker is not threading.current_thread():
            worker.join()

    def _expected(self, now: float) -> int:
        """Callers worth waiting for: those queued and those answered lately (about to ask again)."""
        self._answered = {c: t for c, t in self._answered.items() if now - t <= self._recent_s}
        recent = len(self._answered)
        return len({r.caller for r in self._queue}) + recent

    def _take(self) -> list[_Request[Item, Result]] | None:
        """The next batch (the oldest request and later ones of its key), or None when the worker ends."""
        with self._cond:
            while not self._queue:
                if self._closed or (not self._cond.wait(self._idle_s) and not self._queue):
                    self._worker = None
                    return None
            key = self._queue[0].key
            deadline = time.monotonic() + self.wait_s
            while True:
                now = time.monotonic()
                same = [r for r in self._queue if r.key == key][: self.max_batch]
                full = len(same) >= min(self.max_batch, self._expected(now))
                if full or now >= deadline or self._closed:
                    break
                self._cond.wait(deadline - now)
            taken = {id(r) for r in same}
            self._queue = [r for r in self._queue if id(r) not in taken]
            return same

    def _work(self) -> None:
        while (batch := self._take()) is not None:
            # A caller may have been cancelled already (never by us, but Future allows it).
            batch = [r for r in batch if r.future.set_running_or_notify_cancel()]
            if not batch:
                continue
            error: Exception | None = None
            try:
                results = list(self._run_batch([r.item for r in batch]))
                if len(results) != len(batch):
                    raise RuntimeError(f"run_batch gave {len(results)} results for {len(batch)} items")
            except Exception as exc:  # every caller of the batch gets the failure; the worker goes on
                error = exc
            with self._cond:
                self.stats.batches += 1
                self.stats.requests += len(batch)
                self.stats.largest = max(self.stats.largest, len(batch))
                # Recorded before the callers wake up, so that the next _take counts them as on their way
                # back with their next request (a thread pool's next item) and waits for them.
                now = time.monotonic()
                self._answered.update((r.caller, now) for r in batch)
            for n, request in enumerate(batch):
                if error is None:
                    request.future.set_result(results[n])
                else:
                    request.future.set_exception(error)

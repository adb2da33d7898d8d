"""An import's rows shared out over worker processes, one row at a time, as the workers free up.

Every worker reads the whole input in the same order, so a row's ordinal (its position in that
stream) names the same row in each; the rows are claimed from one counter all workers share and
converted by the claimer alone. Reading is the small part of an import (2% of it on the SWE-agent
benchmark: `benchmarks/results/importers.md`), converting and writing the large one, so reading it
all in each worker costs little; claiming a row at a time, rather than splitting the input into
fixed parts, keeps every worker busy to the end whatever the rows cost, on a machine other work
slows at random.

Worker 0 runs in this process and starts at once; the others are spawned (a fresh interpreter: no
fork of a process whose threads may hold locks) once the import has run `START_AFTER_S` from its first
row, and join when they have started. A short import never pays their start (0.5 s of CPU each here),
an input that names no data is refused without them, and a long one loses a second of them. A worker
that claimed an ordinal past the input's end finds nothing there, so nothing is converted twice or
lost.

Stopping: Ctrl-C reaches this process, which asks the other workers to stop (they ignore the
signal, so that each ends where it chooses: between rows, its converted rows written). A worker
that fails stops the others the same way. A killed parent (SIGKILL, SIGTERM) takes the workers with
it (Linux: the parent-death signal; elsewhere they notice at the next row), as a killed one-process
import would end: a rerun resumes.

Spawned workers import the caller's main module again, so a script that imports with workers needs
the `if __name__ == "__main__":` guard of every spawning program (`python -m collectors.importers`
has it).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

Result = TypeVar("Result")
_PR_SET_PDEATHSIG = 1  # prctl(2)
_PROGRESS_S = 0.2  # how often the parent's progress line adds up the workers' counts
START_AFTER_S = 1.0  # from the first row to the start of the other workers (see the module doc)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Stopped(Exception):
    """Raised in a worker between rows when the parent asks it to stop."""


class Share:
    """The rows one worker converts (`mine`), and how it tells its progress (`tick`). A one-process
    import has the whole stream, as worker 0."""

    index = 0

    def __init__(self, on_tick: Callable[[int, int], None] | None = None) -> None:
        self._on_tick = on_tick

    def mine(self, ordinal: int) -> bool:
        return True

    def exhausted(self) -> bool:
        """Whether none of the rows still to come is this worker's: it may stop reading."""
        return False

    def ended(self, rows: int) -> None:
        """The input ended after `rows` rows (`--limit` included)."""

    def tick(self, read: int, dead: int) -> None:
        """After each of this worker's rows: its rows so far and its dead letters so far."""
        if self._on_tick is not None:
            self._on_tick(read, dead)


@dataclass
class _Board:
    """What the workers share: the claim counter, the input's length once a worker has read it all,
    the stop flag and each one's counts."""

    claims: Any  # multiprocessing.Value("q"): the next ordinal nobody has claimed
    rows: Any  # multiprocessing.RawValue("q"): the input's rows, -1 until a worker reaches its end
    stop: Any  # multiprocessing.RawValue("b")
    counts: Any  # multiprocessing.RawArray("q"): rows read and dead letters, per worker
    parent: int  # the pid a worker's parent must keep, else the worker ends

    def totals(self) -> tuple[int, int]:
        return sum(self.counts[0::2]), sum(self.counts[1::2])


class _Claimed(Share):
    """Worker `index`'s share: `mine` is asked for every ordinal in order. Past the ordinal it holds,
    the worker claims the next unclaimed one, which is never behind it: the counter is past every
    claimed ordinal, this worker's included, and the worker asks again only on passing its own.
    `start_others` (the parent's worker only) is called `START_AFTER_S` after the first row."""

    def __init__(self, index: int, board: _Board, start_others: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.index = index
        self._board, self._start_others = board, start_others
        self._start_at: float | None = None
        self._held = -1

    def mine(self, ordinal: int) -> bool:
        if self._start_others is not None:
            now = time.monotonic()
            self._start_at = self._start_at or now + START_AFTER_S
            if now >= self._start_at:
                self._start_others()
                self._start_others = None
        if ordinal > self._held:
            with self._board.claims.get_lock():
                self._held = self._board.claims.value
                self._board.claims.value = self._held + 1
        return ordinal == self._held

    def exhausted(self) -> bool:
        # The ordinal it holds is past the end: its next claim would be further still. A worker
        # started after the others read everything stops at its first claim.
        return 0 <= self._board.rows.value <= self._held

    def ended(self, rows: int) -> None:
        self._board.rows.value = rows

    def tick(self, read: int, dead: int) -> None:
        self._board.counts[2 * self.index] = read
        self._board.counts[2 * self.index + 1] = dead
        if self.index and os.getppid() != self._board.parent:
            os._exit(1)  # the parent is gone: end as a killed import does, nothing more written
        if self._board.stop.value:
            raise Stopped


def run_shares(
    work: Callable[[Share], Result], workers: int, report: Callable[[int, int], None]
) -> list[Result]:
    """`work(share)` in `workers` workers (see the module doc); the results of those that started,
    in worker order. `report(rows read, dead letters)` is called from a thread while they run, and
    once at the end. `work` is pickled to the spawned workers (a module-level function, or a partial
    of one). The first error of a worker is raised once every worker has stopped; a stopped
    worker's `Stopped` is none (the error that stopped it comes first)."""
    context = multiprocessing.get_context("spawn")
    board = _Board(
        claims=context.Value("q", 0),
        rows=context.RawValue("q", -1),
        stop=context.RawValue("b", 0),
        counts=context.RawArray("q", 2 * workers),
        parent=os.getpid(),
    )
    results: list[Any] = []
    errors: list[BaseException] = []
    finished = threading.Event()
    reporter = threading.Thread(target=_report_until, args=(board, report, finished), daemon=True)
    reporter.start()
    pool = ProcessPoolExecutor(workers - 1, mp_context=context, initializer=_start_worker, initargs=(board,))
    futures: list[Future] = []

    def stop_others(future: Future) -> None:
        if not future.cancelled() and future.exception() is not None:
            board.stop.value = 1

    def start_others() -> None:
        for index in range(1, workers):
            futures.append(pool.submit(_spawned_share, work, index))
            futures[-1].add_done_callback(stop_others)

    try:
        try:
            results.append(work(_Claimed(0, board, start_others=start_others)))
        except BaseException as exc:  # Ctrl-C included: the others stop, then it is raised
            errors.append(exc)
            board.stop.value = 1
        results += [_result(future, board, errors) for future in futures]
    finally:
        pool.shutdown()
        finished.set()
        reporter.join()
        report(*board.totals())
    failures = [e for e in errors if not isinstance(e, Stopped)]
    if failures:
        raise failures[0]
    return results


def _result(future: Future, board: _Board, errors: list[BaseException]) -> Any:
    """The worker's result; its error goes to `errors`. Ctrl-C while waiting stops the workers and
    waits on: they end between rows, their converted rows written."""
    while True:
        try:
            return future.result()
        except KeyboardInterrupt as exc:  # this process's own: the spawned workers ignore SIGINT
            errors.append(exc)
            board.stop.value = 1
        except BaseException as exc:
            errors.append(exc)
            board.stop.value = 1
            return None


def _report_until(board: _Board, report: Callable[[int, int], None], finished: threading.Event) -> None:
    while not finished.wait(_PROGRESS_S):
        report(*board.totals())


_BOARD: _Board | None = None  # a spawned worker's board, set as it starts


def _start_worker(board: _Board) -> None:
    global _BOARD
    _BOARD = board
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent hears Ctrl-C and says when to stop
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != board.parent:  # the parent died before the line above
        os._exit(1)


def _spawned_share(work: Callable[[Share], Result], index: int) -> Result:
    assert _BOARD is not None, "_start_worker sets the board"
    return work(_Claimed(index, _BOARD))

"""Supervising a fleet's worker threads: signals, progress, periodic commits, the abort grace."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from tqdm import tqdm

from schemas import StorageError

if TYPE_CHECKING:
    from collectors.runner import Fleet

log = logging.getLogger(__name__)

EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}


class StopRequest:
    """Set by a signal handler (or the runner); installed before anything else so that a signal
    at any moment of the run is handled the same way."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name: str | None = None


def install_signal_handlers(request: StopRequest) -> dict[int, object]:
    if threading.current_thread() is not threading.main_thread():
        return {}

    def on_signal(signum: int, _frame: object) -> None:
        # Only flags: the handler runs between two bytecodes of the main thread, which may hold
        # any lock at that moment.
        name = signal.Signals(signum).name
        if request.signal_name is None:
            request.signal_name = name
            print(f"\n{name}: stopping; in-flight episodes will be saved as aborted", file=sys.stderr)
        request.event.set()

    return {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}


def supervise(fleet: Fleet, workers: int, total: int) -> None:
    """Start the workers, show progress, flush shards periodically, enforce the abort grace."""
    config = fleet.config
    threads = [
        threading.Thread(target=fleet.worker, args=(wid,), name=f"fleet-worker-{wid}", daemon=True)
        for wid in range(workers)
    ]
    for thread in threads:
        thread.start()
    bar = tqdm(total=total, desc=config.domain, unit="ep", file=sys.stderr, disable=not config.progress)
    last_flush = time.monotonic()
    stop_seen: float | None = None
    forced = False
    try:
        while any(thread.is_alive() for thread in threads):
            try:
                time.sleep(0.2)
            except KeyboardInterrupt:  # signal handlers not installed (not the main thread's choice)
                fleet.request.signal_name = fleet.request.signal_name or "SIGINT"
                fleet.stop.set()
            bar.set_postfix(steps=fleet.stats.steps, errors=sum(fleet.stats.errors.values()), refresh=False)
            bar.update(fleet.done - bar.n)
            clock = time.monotonic()
            if clock - last_flush >= config.flush_interval_s:
                last_flush = clock
                try:
                    fleet.lock.check()
                    fleet.writer.flush()
                except StorageError as exc:
                    fleet.fail(str(exc))
            if fleet.stop.is_set():
                stop_seen = stop_seen or clock
                if not forced and clock - stop_seen >= config.abort_grace_s:
                    forced = True
                    fleet.force_close_sandboxes()
                elif forced and clock - stop_seen >= config.abort_grace_s + 30:
                    log.error("workers did not stop 30 s after their sandboxes were closed; giving up")
                    break
    finally:
        bar.update(fleet.done - bar.n)
        bar.close()

"""How a fleet is stopped: the stop request, the signal handlers that set it, the exit codes.

The runner's supervision loop watches the request; this module knows nothing of fleets."""

from __future__ import annotations

import signal
import sys
import threading

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

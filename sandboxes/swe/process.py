"""Run one command to completion with bounded time and bounded output.

The command runs in its own session (process group); on timeout the whole group is killed with
SIGKILL. stdout and stderr share one pipe, so they interleave as a terminal would show them. Only
the first and last `limit / 2` bytes are kept; what lies between is counted. Every wait is bounded:
a background process that keeps the pipe open after the command exits gets `DRAIN_S` to finish
writing, then its group is killed too. A process that left the group (setsid, a double fork) is
out of reach of that kill: a caller that starts the command in a `ProcessBox` passes the box's
`kill` as `stop`, called when the command ends or times out.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from sandboxes.swe.text import cut_middle

DRAIN_S = 0.5
KILL_WAIT_S = 5.0
_CHUNK = 65536


@dataclass
class Finished:
    head: bytes  # the first bytes of the output
    tail: bytes  # the last bytes, after the dropped ones
    dropped: int  # bytes between head and tail that were not kept
    exit_status: int | None  # None when timed out
    timed_out: bool
    info: bytes = b""  # what the command wrote on its info pipe


class _Capture:
    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        excess = len(self.tail) - self.half
        if excess > 0:
            self.dropped += excess
            del self.tail[:excess]


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_bounded(
    argv: list[str],
    *,
    timeout_s: float,
    limit: int,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    info_pipe: tuple[int, int] | None = None,
    stop: Callable[[], None] | None = None,
) -> Finished:
    """Run `argv` (no shell on our side). `info_pipe` (read end, write end; both closed here): the
    write end is passed to the command, and what it writes there comes back in `Finished.info`.
    `stop` kills whatever the command started, before its process group is killed."""
    info_r, info_w = info_pipe or (-1, -1)
    capture = _Capture(limit)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            pass_fds=(info_w,) if info_pipe else (),
        )
    except BaseException:
        if info_r >= 0:
            os.close(info_r)
        raise
    finally:
        if info_w >= 0:
            os.close(info_w)
    assert proc.stdout is not None
    out = proc.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    drain_until: float | None = None
    timed_out = False
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if drain_until is None and proc.poll() is not None:
                drain_until = now + DRAIN_S
            if drain_until is not None and now >= drain_until:
                break
            wait = min(deadline, drain_until or deadline) - now
            ready, _, _ = select.select([out], [], [], min(wait, 0.05 if drain_until is None else wait))
            if ready:
                chunk = os.read(out, _CHUNK)
                if not chunk:
                    break
                capture.feed(chunk)
        if not timed_out and proc.poll() is None:  # output closed, the command still running
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        if stop is not None:
            stop()
        _kill_group(proc.pid)
        try:
            proc.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        proc.stdout.close()
    info = b""
    if info_pipe:
        os.set_blocking(info_r, False)
        try:
            info = os.read(info_r, _CHUNK)
        except BlockingIOError:
            info = b""
        finally:
            os.close(info_r)
    status = proc.returncode
    if status is not None and status < 0:
        status = 128 - status  # killed by a signal: the status a shell reports
    return Finished(
        head=bytes(capture.head),
        tail=bytes(capture.tail),
        dropped=capture.dropped,
        exit_status=None if timed_out else status,
        timed_out=timed_out,
        info=info,
    )


def render(finished: Finished, timeout_s: float) -> str:
    """The bash tool's text: output, a truncation marker where bytes were dropped, a status line."""
    total = len(finished.head) + finished.dropped + len(finished.tail)
    text = cut_middle(finished.head, finished.tail, total)
    if text and not text.endswith("\n"):
        text += "\n"
    if finished.timed_out:
        return text + f"[timed out after {timeout_s:g} s]"
    return text + f"[exit status: {finished.exit_status}]"

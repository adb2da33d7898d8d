"""What an MCP server writes outside the protocol: its stderr, and stray lines on a stdio server's stdout.

Neither is tool output, but both are evidence (a warning, the traceback before a crash), so each
step's `info` carries what the server wrote since the step before, bounded: the tail of its stderr
with the byte counts, and the first stray stdout lines with their count. A reader thread drains the
stderr pipe at all times, so a server that floods stderr never blocks on a full pipe while the
sandbox is idle, and the memory kept stays bounded whatever the server writes.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable
from typing import Any

STEP_STDERR_BYTES = 4000
STEP_STDOUT_LINES = 20
LINE_CHARS = 500
TAIL_BYTES = 2000  # the last output quoted when a server fails to start or dies
READ_CHUNK = 65536
POLL_S = 0.2


class ServerOutput:
    """Bounded buffers of a server's stderr and stray stdout, taken step by step."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stderr = bytearray()  # this step's last STEP_STDERR_BYTES
        self._stderr_bytes = 0  # this step's total
        self._tail = bytearray()  # the last TAIL_BYTES over the server's life
        self._lines: list[str] = []
        self._line_count = 0
        self._line_bytes = 0
        self._readers: list[_PipeReader] = []

    def add_stderr(self, data: bytes) -> None:
        with self._lock:
            self._stderr_bytes += len(data)
            _append_bounded(self._stderr, data, STEP_STDERR_BYTES)
            _append_bounded(self._tail, data, TAIL_BYTES)

    def add_stdout_line(self, line: bytes) -> None:
        """A line on a stdio server's stdout that is not a JSON-RPC message."""
        with self._lock:
            self._line_count += 1
            self._line_bytes += len(line) + 1
            if len(self._lines) < STEP_STDOUT_LINES:
                text = line.decode("utf-8", "replace")
                self._lines.append(text if len(text) <= LINE_CHARS else text[:LINE_CHARS] + " [...]")

    def read_pipe(self, fd: int) -> None:
        """Feed everything written to `fd` (a pipe's read end, owned from now on) into stderr."""
        reader = _PipeReader(fd, self.add_stderr)
        self._readers.append(reader)
        reader.start()

    def take_step(self) -> dict[str, Any]:
        """What the server wrote since the last take, as a step's `info` entry ({} when nothing)."""
        for reader in self._readers:
            reader.drain()
        with self._lock:
            taken: dict[str, Any] = {}
            if self._stderr_bytes:
                taken["stderr"] = self._stderr.decode("utf-8", "replace")
                taken["stderr_bytes"] = self._stderr_bytes
                taken["stderr_dropped_bytes"] = self._stderr_bytes - len(self._stderr)
            if self._line_count:
                taken["stdout_lines"] = list(self._lines)
                taken["stdout_line_count"] = self._line_count
                taken["stdout_line_bytes"] = self._line_bytes
            self._stderr.clear()
            self._lines.clear()
            self._stderr_bytes = self._line_count = self._line_bytes = 0
            return taken

    def tail(self, wait_s: float = 0.0) -> str:
        """The last stderr the server wrote, after up to `wait_s` for its pipe to reach its end
        (a dying server's last words may still be in flight)."""
        for reader in self._readers:
            reader.finish(wait_s)
        with self._lock:
            return self._tail.decode("utf-8", "replace").strip()

    def close(self) -> None:
        for reader in self._readers:
            reader.stop()
        self._readers = []


def _append_bounded(buffer: bytearray, data: bytes, limit: int) -> None:
    buffer += data[-limit:]
    if len(buffer) > limit:
        del buffer[: len(buffer) - limit]


class _PipeReader:
    """A daemon thread reading one pipe until its end; `drain` reads what is there now from any thread."""

    def __init__(self, fd: int, sink: Callable[[bytes], None]) -> None:
        self._fd = fd
        self._sink = sink
        self._read_lock = threading.Lock()
        self._ended = threading.Event()
        self._stopping = threading.Event()
        os.set_blocking(fd, False)
        self._thread = threading.Thread(target=self._run, name="mcp-server-stderr", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set() and not self._ended.is_set():
                readable, _, _ = select.select([self._fd], [], [], POLL_S)
                if readable:
                    self.drain()
        finally:
            with self._read_lock:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._ended.set()

    def drain(self) -> None:
        with self._read_lock:
            while not self._ended.is_set():
                try:
                    data = os.read(self._fd, READ_CHUNK)
                except BlockingIOError:
                    return
                except OSError:
                    data = b""
                if not data:
                    self._ended.set()
                    return
                self._sink(data)

    def finish(self, wait_s: float) -> None:
        self._ended.wait(wait_s)
        self.drain()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(POLL_S * 5)

"""A private tmux server driven by one long-lived control-mode client (`tmux -C`) over pipes.

Spawning a tmux client per call costs 2-3 ms; a control-mode round trip over an open pipe costs
about 0.5 ms, so each pane gets one client for its whole life. A reader thread parses the
protocol: `%begin/%end/%error` blocks answer our commands in order, `%output` lines carry the
pane's output (octal-escaped) to a callback, `%exit` or EOF means the server is gone.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable

from sandboxes.checks import process_exists
from sandboxes.containment import ProcessBox
from sandboxes.terminal.reaper import remove_tmux_socket, tmux_socket_name

_OCTAL = re.compile(rb"\\([0-7]{3})")


class TmuxError(RuntimeError):
    """A tmux command failed or tmux went away."""


def quote(text: str) -> str:
    """Quote a string as one tmux command-language word (single quotes, no expansion)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _unescape(data: bytes) -> bytes:
    if b"\\" not in data:
        return data
    return _OCTAL.sub(lambda m: bytes([int(m[1], 8)]), data)


class _Reply:
    __slots__ = ("done", "lines", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.lines: list[str] = []
        self.error = False


class TmuxSession:
    """One tmux server (private socket) with one session of fixed size running `argv`."""

    def __init__(
        self,
        argv: list[str],
        *,
        width: int,
        height: int,
        history_limit: int,
        workdir: str,
        conf_dir: str,
        on_output: Callable[[bytes], None],
        on_end: Callable[[str], None],
        box: ProcessBox | None = None,
    ) -> None:
        """`box`: where the client, and so the server it forks and the pane, are started."""
        self.socket = tmux_socket_name()
        conf = os.path.join(conf_dir, "tmux.conf")
        with open(conf, "w") as f:
            # escape-time 0: a lone ESC (vim) must not wait for a possible key sequence.
            # destroy-unattached: when our control client goes (the collector died and its pipe
            # closed), the session and so the server end with it.
            f.write(
                f"set -g history-limit {history_limit}\nset -g status off\n"
                "set -g escape-time 0\nset -g default-terminal xterm-256color\n"
                "set -g destroy-unattached on\n"
            )
        # The control client creates the session itself, so no output (the first prompt) can
        # appear before it is attached to receive it.
        self._on_output = on_output
        self._on_end = on_end
        self._pending: deque[_Reply] = deque()
        self._lock = threading.Lock()
        self.ended: str | None = None
        client = ["tmux", "-L", self.socket, "-f", conf, "-C", "new-session", "-s", "main"]
        client += ["-x", str(width), "-y", str(height), "-c", workdir, "--", *argv]
        self._proc = subprocess.Popen(
            box.wrap(client) if box else client,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            # A Ctrl-C to the collector's process group must reach the collector only: the client
            # is how the sandbox is closed.
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"tmux-{self.socket}", daemon=True)
        self._reader.start()
        self.server_pid = 0
        self.pane_pid = 0
        try:
            self.server_pid, self.pane_pid = self._pids()
        except TmuxError:
            self.kill()
            raise

    def _pids(self, wait: float = 5.0) -> tuple[int, int]:
        """The server's and the pane's pids. On a loaded machine the first answer can come before
        the pane's process exists (one field, or none): ask again until both are there."""
        deadline = time.monotonic() + wait
        while True:
            lines = self.run("display-message -p -t main '#{pid} #{pane_pid}'")[0]
            fields = lines[0].split() if lines else []
            if len(fields) == 2 and all(f.isdigit() for f in fields):
                return int(fields[0]), int(fields[1])
            if time.monotonic() > deadline:
                raise TmuxError(f"tmux did not report its pids: {lines!r}")
            time.sleep(0.05)

    @property
    def client_pid(self) -> int:
        return self._proc.pid

    def run(self, *commands: str, timeout: float = 10.0) -> list[list[str]]:
        """Send commands in one write and return each one's output lines."""
        replies = [_Reply() for _ in commands]
        payload = "".join(c + "\n" for c in commands).encode()
        with self._lock:
            if self.ended is not None:
                raise TmuxError(f"tmux is gone: {self.ended}")
            self._pending.extend(replies)
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(payload)
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise TmuxError(f"tmux is gone: {exc}") from exc
        for command, reply in zip(commands, replies, strict=True):
            if not reply.done.wait(timeout):
                raise TmuxError(f"no answer from tmux within {timeout} s to {command!r}")
            if reply.error:
                raise TmuxError(f"tmux {command!r} failed: {' '.join(reply.lines) or self.ended}")
        return [r.lines for r in replies]

    def _read(self) -> None:
        stream = self._proc.stdout
        assert stream is not None
        reply: _Reply | None = None
        block_key = b""
        for line in iter(stream.readline, b""):
            if block_key:
                if (
                    line[:5] == b"%end "
                    and line[5:] == block_key
                    or line[:7] == b"%error "
                    and (line[7:] == block_key)
                ):
                    if reply is not None:
                        reply.error = line[:6] == b"%error"
                        reply.done.set()
                    block_key, reply = b"", None
                elif reply is not None:
                    reply.lines.append(line.rstrip(b"\n").decode("utf-8", errors="replace"))
            elif line.startswith(b"%output "):
                parts = line.rstrip(b"\n").split(b" ", 2)
                self._on_output(_unescape(parts[2]) if len(parts) == 3 else b"")
            elif line.startswith(b"%begin "):
                block_key = line[7:]
                # Flags 1 mark a block answering this client; the attach itself yields one with 0.
                if block_key.split()[-1:] == [b"1"]:
                    with self._lock:
                        reply = self._pending.popleft() if self._pending else None
            elif line.startswith(b"%exit"):
                break
        self._finish("tmux server exited (the shell ended)")

    def _finish(self, reason: str) -> None:
        with self._lock:
            if self.ended is None:
                self.ended = reason
            while self._pending:
                reply = self._pending.popleft()
                reply.error = True
                reply.done.set()
        self._on_end(reason)

    def kill(self) -> None:
        """Stop the server (its panes get SIGHUP) and the client; wait until both are gone."""
        with self._lock:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write(b"kill-server\n")
                self._proc.stdin.close()
            except (BrokenPipeError, ValueError, OSError):
                pass
        try:
            self._proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=3)
        _reap(self.server_pid)
        _reap(self.pane_pid)
        remove_tmux_socket(self.socket)


def _reap(pid: int, timeout: float = 2.0) -> None:
    """Wait for a process that is not our child to disappear; SIGKILL it if it lingers."""
    deadline = time.monotonic() + timeout
    while pid > 0 and process_exists(pid):
        if time.monotonic() > deadline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        time.sleep(0.005)

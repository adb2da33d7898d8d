"""Shell integration: the rc file the sandbox's bash runs, and the reader of its output stream.

The prompt carries two OSC 133 marks (the shell-integration sequences VS Code, iTerm2 and WezTerm
use): `D;<exit status>` (command finished) and `A;cwd=<dir>` (prompt shown). They are invisible
escape sequences, so the rendered screen keeps a normal `agent@sandbox:~$ ` prompt, while the
pane's raw output stream tells us, without polling or fixed sleeps, that the shell is ready again,
with which exit status and in which directory.

The marks sit at the END of PS1 (not in PROMPT_COMMAND, which bash runs before drawing the prompt):
when a mark reaches us the prompt text before it is already on tmux's screen, so a capture taken
then shows the prompt. PROMPT_COMMAND records `$?`, numbers
the prompt (`n=`) and re-appends the marks if a command replaced PS1. Readline redraws a prompt
(after a resize, C-l) with the same number, so only a new number means "the command finished".
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque

SHELL_RC = r"""# Sourced by the sandbox's interactive bash (bash --rcfile); written by agentworld.
[ -f ~/.bashrc ] && . ~/.bashrc
PS1='\u@\h:\w\$ '
HISTCONTROL=ignoreboth
__aw_marks='\[\e]133;D;${__aw_status}\a\e]133;A;n=${__aw_n};cwd=${PWD}\a\]'
__aw_prompt() { __aw_status=$?; ((__aw_n++)); [[ $PS1 == *"$__aw_marks" ]] || PS1+=$__aw_marks; }
PROMPT_COMMAND=__aw_prompt
"""

_MARK_PREFIX = b"\x1b]133;"
_MARKS = re.compile(rb"\x1b\]133;D;(\d*)\x07\x1b\]133;A;n=(\d+);cwd=([^\x07]*)\x07")
# A mark split across two reads is held back until the next read completes it; anything longer
# than this cannot be one of our marks and is passed on as output.
_MAX_CARRY = 8192


class StepOutput:
    """The raw output bytes of one step, bounded: the first and last `cap // 2` bytes are kept."""

    def __init__(self, cap: int) -> None:
        self.total = 0
        self._half = max(cap // 2, 1)
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_size = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._half - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        self._tail.append(data)
        self._tail_size += len(data)
        while self._tail_size - len(self._tail[0]) >= self._half:
            self._tail_size -= len(self._tail.popleft())

    def content(self) -> bytes:
        tail = b"".join(self._tail)
        kept = len(self._head) + len(tail)
        if kept >= self.total:
            return bytes(self._head) + tail
        if len(tail) > self._half:
            tail = tail[-self._half :]
        dropped = self.total - len(self._head) - len(tail)
        marker = f"\n[... {dropped} of {self.total} bytes of output dropped ...]\n"
        return bytes(self._head) + marker.encode() + tail


class ShellStream:
    """Consumes the pane's output stream (fed by the tmux reader thread); steps wait on it."""

    def __init__(self, output_cap: int) -> None:
        self.cond = threading.Condition()
        self.prompt = 0  # number of the latest prompt the shell drew
        self.step_prompt = 0  # the prompt number when the current step began
        self.exit_code: int | None = None
        self.cwd: str | None = None
        self.last_output = time.monotonic()
        self.ended: str | None = None  # why the stream ended (tmux exited), None while running
        self._cap = output_cap
        self._carry = b""
        self.step = StepOutput(output_cap)

    def begin_step(self) -> int:
        """Start recording a new step's output; returns the prompt number to wait past."""
        with self.cond:
            self.step = StepOutput(self._cap)
            self.step_prompt = self.prompt
            return self.prompt

    def feed(self, chunk: bytes) -> None:
        with self.cond:
            buf = self._carry + chunk
            self._carry = b""
            pos = 0
            for match in _MARKS.finditer(buf):
                self.step.add(buf[pos : match.start()])
                pos = match.end()
                self.prompt = int(match[2])
                self.exit_code = int(match[1]) if match[1] else None
                self.cwd = match[3].decode("utf-8", errors="replace")
            rest = buf[pos:]
            cut = _partial_mark_start(rest)
            if cut is not None:
                self._carry = rest[cut:]
                rest = rest[:cut]
            self.step.add(rest)
            self.last_output = time.monotonic()
            self.cond.notify_all()

    def end(self, reason: str) -> None:
        with self.cond:
            if self.ended is None:
                self.ended = reason
            self.cond.notify_all()

    def wait_prompt(self, after: int, timeout: float) -> bool:
        """Wait for a prompt numbered above `after`; False on timeout or if the stream ended."""
        return self.wait(lambda: self.prompt > after, timeout)

    def wait(self, predicate: object, timeout: float) -> bool:
        """Wait until `predicate()` holds or the stream ends; True if the predicate held."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():  # type: ignore[operator]
                if self.ended is not None:
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True


def _partial_mark_start(data: bytes) -> int | None:
    """Index where a possibly incomplete mark begins near the end of `data`, if any.

    Complete marks were already removed, so any mark prefix left near the end is waiting for the
    rest of its bytes (the first one, so that a `D` part is not split from its `A` part).
    """
    cut = data.find(_MARK_PREFIX, max(0, len(data) - _MAX_CARRY))
    if cut != -1:
        return cut
    for size in range(len(_MARK_PREFIX) - 1, 0, -1):
        if data.endswith(_MARK_PREFIX[:size]):
            return len(data) - size
    return None

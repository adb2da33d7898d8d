"""Owning the session's processes: the agent is a child subreaper, so everything the session
starts stays its descendant and is killed when the agent ends."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_process(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.kill()
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return found


def kill_descendants() -> None:
    """TERM (Xvfb removes its socket and lock file), then KILL, everything below this process."""
    me = os.getpid()
    for sig, pause in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 0.0)):
        todo, seen = [me], []
        while todo:
            for child in _children(todo.pop()):
                seen.append(child)
                todo.append(child)
        for pid in seen:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + pause
        while any(pid_alive(p) for p in seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in seen:  # reap: they are our children or, as subreaper, re-parented to us
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def set_subreaper() -> None:
    pr_set_child_subreaper = 36
    try:
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: children started in their own sessions are still killed by group

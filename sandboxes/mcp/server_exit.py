"""How an MCP server's process ended: stopping it (SIGTERM, then SIGKILL when it ignores that) and
describing its exit status, both as records a trajectory can carry.

The launched process heads its own process group (start_new_session). In bwrap it is bwrap's
monitor: SIGTERM would kill the monitor, and the kernel would then SIGKILL the jail (bwrap's
--die-with-parent) before the server saw the signal. So inside a jail SIGTERM goes to the group's
other members (the server and its children; bwrap's init ignores it), and only SIGKILL goes to all.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any

from sandboxes.checks import group_members, process_exists

STOP_GRACE_S = 2.0
KILL_WAIT_S = 2.0
POLL_S = 0.01


def stop_server(pid: int, jailed: bool, grace_s: float = STOP_GRACE_S) -> dict[str, Any]:
    """Stop the process group `pid` heads: SIGTERM, up to `grace_s` to exit, then SIGKILL.

    Returns what happened: {"signals": [...], "exited_after_s": s} and, when SIGTERM was not enough,
    "escalated": "SIGTERM ignored for 2 s: SIGKILL" (plus "survived_sigkill": true if even that failed).
    """
    began = time.monotonic()
    if not process_exists(pid):
        return {"signals": [], "exited_after_s": 0.0, "already_exited": True}
    for target in _term_targets(pid, jailed):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, signal.SIGTERM)
    record: dict[str, Any] = {"signals": ["SIGTERM"]}
    if not _wait_gone(pid, grace_s):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        record["signals"].append("SIGKILL")
        record["escalated"] = f"SIGTERM ignored for {grace_s:g} s: SIGKILL"
        if not _wait_gone(pid, KILL_WAIT_S):
            record["survived_sigkill"] = True
    record["exited_after_s"] = round(time.monotonic() - began, 3)
    return record


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` heads, if any of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _term_targets(pid: int, jailed: bool) -> list[int]:
    if not jailed:
        return [-pid]  # the whole group (os.kill with a negative pid)
    return [member for member in group_members(pid) if member != pid]


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while process_exists(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def exit_status(returncode: int | None, jailed: bool) -> dict[str, Any]:
    """{"exit_code", "signal", "text"} for a returncode (negative: killed by that signal). bwrap
    reports a server killed by signal N as exit code 128 + N, so inside a jail such a code names
    the signal too."""
    if returncode is None:
        return {"exit_code": None, "signal": None, "text": "exit status unknown (still running)"}
    if returncode < 0:
        name = _signal_name(-returncode) or f"signal {-returncode}"
        return {"exit_code": None, "signal": name, "text": f"killed by {name}"}
    name = _signal_name(returncode - 128) if jailed and returncode > 128 else None
    if name:
        return {
            "exit_code": returncode,
            "signal": name,
            "text": f"killed by {name} (the jail's exit code {returncode} = 128 + signal)",
        }
    return {"exit_code": returncode, "signal": None, "text": f"exit code {returncode}"}


def _signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None

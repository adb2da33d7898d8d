"""Where sandboxes keep what they build once and reuse (search indexes, MCP server installs, SWE
repositories): $AGENTWORLD_CACHE_DIR, else the XDG cache, and the lock that lets one process at a
time build an entry. A leaf module, so that asking for the path imports no domain's dependencies."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root() -> Path:
    if os.environ.get("AGENTWORLD_CACHE_DIR"):
        return Path(os.environ["AGENTWORLD_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agentworld"


@contextmanager
def entry_lock(path: Path, timeout_s: float, busy: Exception, poll_s: float = 0.5) -> Iterator[None]:
    """An exclusive lock on the file `path` (made, with its folder, if missing) while a cache entry is
    built, so that parallel sandboxes, test runs and CLIs never build it at once: the second waits,
    then finds it built. Raises `busy` when another process holds the lock longer than `timeout_s`.
    The kernel drops the lock however its holder ends, so it is never stale."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise busy from None
                time.sleep(poll_s)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

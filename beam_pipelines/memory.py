"""glibc heap settings for the pipeline's processes: few arenas, and free pages handed back.

The runner's and the workers' peak RSS should follow what is live, not what the heap once held.
Two glibc behaviours break that: every thread may get its own arena (up to eight per core), and
an arena keeps the pages of freed blocks. Elsewhere (musl, macOS) both calls do nothing.
"""

from __future__ import annotations

import ctypes
import os

_M_ARENA_MAX = -8  # from glibc's malloc.h


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim  # noqa: B018 - probes for glibc
    except (OSError, AttributeError):
        return None
    return libc


def few_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's heap arenas in this process and in the SDK workers it starts.

    Measured with this pipeline on 2,000 and 8,000 trajectories: peak RSS +12.6% with glibc's
    default, +7.8% with two arenas. Workers read MALLOC_ARENA_MAX when they start; this process,
    already running, is told through mallopt. A user's own MALLOC_ARENA_MAX wins.
    """
    os.environ.setdefault("MALLOC_ARENA_MAX", str(arenas))
    libc = _glibc()
    try:
        wanted = int(os.environ["MALLOC_ARENA_MAX"])
    except ValueError:  # a value glibc ignores too
        return
    if libc is not None:
        libc.mallopt(_M_ARENA_MAX, wanted)


def release_free_memory() -> None:
    """Give the pages of freed heap blocks back to the system (glibc's malloc_trim).

    A worker that formats and tokenises one chunk of trajectories after another frees most of what
    a chunk allocated, but the freed blocks stay in the arena, scattered among live ones, and the
    process's RSS creeps up with the work done. Trimming after each chunk costs about a millisecond.
    """
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)

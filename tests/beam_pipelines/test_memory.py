"""glibc heap settings of the pipeline's processes (beam_pipelines/memory.py), on the real allocator."""

import subprocess
import sys
import textwrap

# Freed blocks scattered among live ones stay in the heap (and in RSS) until malloc_trim hands their
# pages back. Blocks of 4 KiB go to glibc's malloc, not to Python's small-object allocator.
_FRAGMENTED_HEAP = textwrap.dedent(
    """
    import resource, sys
    from beam_pipelines.memory import release_free_memory

    def rss_mib():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize() / 2**20

    blocks = [bytes(4096) for _ in range(50_000)]  # about 200 MiB
    kept = blocks[::64]
    del blocks
    before = rss_mib()
    release_free_memory()
    print(before, rss_mib())
    """
)


def test_release_free_memory_returns_freed_heap_pages_to_the_system():
    out = subprocess.run(
        [sys.executable, "-c", _FRAGMENTED_HEAP], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    before, after = map(float, out.split())
    assert before > 150  # the freed blocks are still resident: the heap could not shrink from its top
    assert after < before - 100

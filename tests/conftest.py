"""What every test package shares: fixtures defined once, so that pytest makes one of each per
session (per worker under xdist), the in-process corpus build, and how `make test` splits the suite
over its workers."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm_server import llm_server_fixture  # noqa: F401 (registers `llm_server`: one server per session)

TESTS = Path(__file__).parent
# Beam's one in-memory worker: the default local set-up starts a worker process per core, each
# importing the pipeline and the tokenizer again, for a corpus of a few trajectories.
IN_PROCESS_BEAM = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]


def build_corpus_in_process(*argv: str) -> None:
    """`python -m beam_pipelines.build_corpus ARGV`, run in this process on Beam's in-memory worker
    (the same files as the default set-up: tests/beam_pipelines/test_build_corpus.py checks it)."""
    from beam_pipelines.build_corpus import main  # here, not above: most tests run without Beam

    assert main([*argv, *IN_PROCESS_BEAM]) == 0


if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # The cores shared out between the workers, set before torch loads (and for every subprocess):
    # two workers each running torch's default pool of one thread per core oversubscribe them, and
    # OpenMP's waiting threads then cost more than they compute.
    threads = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    os.environ.setdefault("MKL_NUM_THREADS", str(threads))
# Folders whose tests share machine-wide resources across modules (the desktop VM and X displays, the
# Android stand-in emulators' console ports): one worker runs each whole group, one test at a time.
SHARED = {
    "sandboxes/desktop/": "desktop",
    "collectors/desktop/": "desktop",
    "training/test_fidelity_desktop.py": "desktop",
    "sandboxes/android/": "android",
    "collectors/android/": "android",
    "training/test_fidelity_android.py": "android",
}


@pytest.hookimpl(wrapper=True)  # around xdist's own hook: the marks before it reads them, a check after
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Under `--dist loadgroup`, a test module is a group by default (its module and session
    fixtures are made once, on one worker), and the folders above are one group each."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        module = item.path.relative_to(TESTS).as_posix()
        group = next((g for prefix, g in SHARED.items() if module.startswith(prefix)), module)
        item.add_marker(pytest.mark.xdist_group(group))
    yield
    if getattr(config.option, "loadgroup", False):  # set on xdist workers under --dist loadgroup
        for item in items:
            _name_the_group(item)


def _name_the_group(item: pytest.Item) -> None:
    """The "@group" suffix xdist's scheduler groups by, where xdist failed to add it: xdist 3.8 writes
    `item._nodeid`, which pytest 9.2 no longer reads (structured node ids; pytest-xdist issue 1386),
    so every test was scheduled on its own and a module's fixtures were made on both workers."""
    marks = item.iter_markers("xdist_group")
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})
    suffix = f"@{'_'.join(names)}"
    if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
        from _pytest.nodeid import coerce_node_id

        item._id = coerce_node_id(item.nodeid + suffix)

"""What every test package shares: fixtures defined once, so that pytest makes one of each per
session (per worker under xdist), and how `make test` splits the suite over its workers."""

import os
from pathlib import Path

import pytest

from tests.llm_server import llm_server_fixture  # noqa: F401 (registers `llm_server`: one server per session)

TESTS = Path(__file__).parent

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


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under `--dist loadgroup`, a test module is a group by default (its module and session
    fixtures are made once, on one worker), and the folders above are one group each."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        module = item.path.relative_to(TESTS).as_posix()
        group = next((g for prefix, g in SHARED.items() if module.startswith(prefix)), module)
        item.add_marker(pytest.mark.xdist_group(group))

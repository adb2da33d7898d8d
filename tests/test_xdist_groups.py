"""`make test`'s schedule: under `--dist loadgroup` every test of a module runs on one worker, so its
module fixtures (a built corpus, a trained checkpoint) are made once. With xdist 3.8 on pytest 9.2 the
grouping had silently stopped (tests/conftest.py says why): this runs real pytest workers and reads
which one ran each test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = ["tests/schemas/test_shared_tokenizer.py", "tests/schemas/test_codec.py"]


def test_each_module_runs_whole_on_one_worker() -> None:
    argv = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this run's worker
    run = subprocess.run([*argv, *MODULES], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module, group in re.findall(r"\[(gw\d)\].* PASSED (tests/\S+?\.py)::\S+@(\S+)", run.stdout):
        workers[module].add(worker)
        assert f"tests/{group}" == module  # the module is its own group
    assert set(workers) == set(MODULES), run.stdout[-3000:]
    assert all(len(ran_on) == 1 for ran_on in workers.values()), dict(workers)
    passed = int(re.search(r"(\d+) passed", run.stdout).group(1))
    assert passed == len(re.findall(r"\[gw\d\].* PASSED ", run.stdout)) > len(MODULES)

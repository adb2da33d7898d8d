"""`python -m training.fidelity` on SWE: a trajectory recorded here in the real SWE sandbox (a git
repository under bwrap), replayed in fresh workspaces for the noise floor, scored with the SWE
metrics, with a world model served over real HTTP."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sandboxes.swe import SweSandbox, bash_action, edit_action, make_config, read_action
from schemas.records import Task
from tests.training.test_fidelity_domains import record, run_fidelity

SOURCE = "def clamp(x, lo, hi):\n    if x > hi:\n        return hi + 1\n    return max(x, lo)\n"
TESTS = (
    "import time\n\nfrom clampy.core import clamp\n\n\n"
    "def test_high():\n    assert clamp(15, 0, 10) == 10\n\n\n"
    "def test_low():\n    assert clamp(-1, 0, 10) == 0\n\n\n"
    "def test_stamp():\n    print(time.time_ns())\n    assert False\n"
)
TEST_COMMAND = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("bwrap") is None:
        pytest.fail("bwrap is not installed (apt-get install bubblewrap)")
    repo = tmp_path_factory.mktemp("swe-fidelity") / "clampy"
    (repo / "clampy").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "clampy" / "__init__.py").write_text("")
    (repo / "clampy" / "core.py").write_text(SOURCE)
    (repo / "tests" / "test_core.py").write_text(TESTS)
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@x.org", "commit", "-qm", "v1"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=30)
    return repo


@pytest.mark.bwrap
def test_swe_noise_floor_from_fresh_workspaces_and_swe_metrics(template: Path, tmp_path: Path) -> None:
    metadata = {"template": str(template), "repo": "clampy", "version": "1.0", "test_command": TEST_COMMAND}
    task = Task(id="clampy-0", instruction="Make the tests pass.", metadata=metadata)
    plan = [
        bash_action(" ".join(TEST_COMMAND)),
        read_action("clampy/core.py"),
        edit_action("str_replace", "clampy/core.py", old_str="return hi + 1", new_str="return hi"),
        bash_action(" ".join(TEST_COMMAND)),
    ]
    with SweSandbox(make_config("bwrap")) as sandbox:
        trajectory = record(sandbox, task, plan)
    assert [t.name for t in trajectory.environment.tools] == ["read", "edit", "bash"]
    assert trajectory.steps[0].observation.data["exit_status"] == 1
    report = run_fidelity(trajectory, tmp_path, replays=2)
    assert report["noise_floor"]["counts"]["finished"] == 2
    ceiling = report["noise_floor"]["real_vs_real"]["by_domain"]["swe"]
    assert ceiling["exit_status_match"] == ceiling["test_counts_match"] == ceiling["diff_line_f1"] == 1.0
    assert ceiling["format_valid"] == 1.0 and ceiling["output_line_f1"] > 0.9
    # Real runs always differ in the printed nanosecond stamp (and often in the durations): the lines
    # that differed between the other runs are compared by form, so for every turn some replay, never
    # equal to the recording on the test runs, agrees on every line. (Two real runs may share a
    # duration by chance; a replay with another one then differs on that line: a true ceiling.)
    rows = [json.loads(line) for line in (tmp_path / "report" / "turns.jsonl").read_text().splitlines()]
    real = [r for r in rows if r["series"] == "real_vs_real"]
    for k in (1, 2, 3, 4):
        assert max(r["output_line_f1"] for r in real if r["turn_idx"] == k) == 1.0, k
    assert not any(r["exact"] for r in real if r["turn_idx"] in (1, 4))
    model = report["systems"]["model/teacher_forced"]["by_domain"]["swe"]
    # Repeating the previous observation gets no exit status or diff right.
    assert model["exit_status_match"] < 1.0 and model["diff_line_f1"] == 0.0
    assert (
        "| exit_status_match | output_line_f1 | diff_line_f1 | test_counts_match |"
        in (tmp_path / "report" / "report.md").read_text()
    )

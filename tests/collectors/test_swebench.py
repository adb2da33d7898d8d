"""SWE-bench instances through `python -m collectors.swe` (its `main(argv)`), on the real SWE sandbox
under bwrap: a tiny git repository made here, with a bug, a later commit that fixes it (which the
task's checkout must not contain), a test_patch that adds the failing tests, and the gold patch.
The gold patch (the scripted oracle) scores 1, no patch scores 0, an instance whose repository or
commit is missing is named and skipped while the rest run. Then one embedded task exported as an
instance and loaded back scores 1 with its exported fix."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from collectors.swe.__main__ import main
from collectors.tasks import embedded_tasks
from sandboxes.swe.repos import default_cache_dir, task_template
from schemas import read_trajectories
from schemas.records import Trajectory

OPS = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a + b\n"
TESTS = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
NEW_TESTS = TESTS.replace("add\n", "add, sub\n", 1) + "\n\ndef test_sub():\n    assert sub(5, 3) == 2\n"
NEW_FILE = "from calc.ops import sub\n\n\ndef test_sub_one():\n    assert sub(4, 1) == 3\n"
F2P = ["tests/test_ops.py::test_sub", "tests/test_new.py::test_sub_one"]
P2P = ["tests/test_ops.py::test_add"]


def git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", *identity, *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout


def write_files(root: Path, files: dict[str, str]) -> None:
    """Each file at its path below root, its folders made."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def make_repo(repos: Path) -> tuple[str, str, str]:
    """repos/acme__calc with a bug at its first commit, fixed in its second; (base, patch, test_patch)."""
    repo = repos / "acme__calc"
    write_files(repo, {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/test_ops.py": TESTS})
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc with a bug")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc" / "ops.py").write_text(OPS.replace("return a + b\n", "return a - b\n").replace(
        "return a - b\n", "return a + b\n", 1))  # fmt: skip
    patch = git(repo, "diff")
    write_files(repo, {"tests/test_ops.py": NEW_TESTS, "tests/test_new.py": NEW_FILE})
    git(repo, "add", "-A")
    test_patch = git(repo, "diff", "--cached", "--", "tests")
    git(repo, "commit", "-qm", "fix sub")  # the future: the task's checkout must not hold it
    return base, patch, test_patch


def instance(instance_id: str, base: str, patch: str, test_patch: str, **extra: object) -> dict:
    found = {
        "instance_id": instance_id,
        "repo": "acme/calc",
        "base_commit": base,
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps(F2P),  # JSON strings, as in the public dataset
        "PASS_TO_PASS": json.dumps(P2P),
    }
    return {**found, **extra}


def collect(out: Path, *args: str) -> dict[str, Trajectory]:
    code = main(["--no-progress", "--backend", "bwrap", "--policy", "scripted", "--out", str(out), *args])
    assert code == 0
    return {t.task.id: t for t in read_trajectories(str(out), validate=True)}


@pytest.fixture(autouse=True)
def bwrap() -> None:
    if shutil.which("bwrap") is None:
        pytest.fail("bwrap is not installed (apt-get install bubblewrap)")


def test_gold_patch_scores_one_and_no_patch_zero(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    repos = tmp_path / "repos"
    base, patch, test_patch = make_repo(repos)
    lines = [
        instance("acme__calc-1", base, patch, test_patch, problem_statement="sub() adds."),
        instance("acme__calc-nopatch", base, "", test_patch),
        instance("other__gone-1", base, patch, test_patch, repo="other/gone"),
        instance("acme__calc-nocommit", "0" * 40, patch, test_patch),
    ]
    instances = tmp_path / "instances.jsonl"
    instances.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cache = tmp_path / "cache"
    found = collect(tmp_path / "out", "--swebench", str(instances), "--swebench-repos", str(repos),
                    "--cache-dir", str(cache))  # fmt: skip
    err = capsys.readouterr().err
    assert "instances.jsonl:3 (other__gone-1): repository other/gone not found" in err
    assert f"instances.jsonl:4 (acme__calc-nocommit): commit {'0' * 40} is not in" in err
    assert sorted(found) == ["acme__calc-1", "acme__calc-nopatch"]

    gold = found["acme__calc-1"]
    assert gold.task.instruction == "sub() adds." and gold.outcome.status == "completed"
    assert gold.outcome.reward == 1.0 and gold.outcome.verification is not None
    assert gold.outcome.verification.details["FAIL_TO_PASS"] == dict.fromkeys(F2P, "PASSED")
    assert "3 passed" in gold.outcome.verification.output

    none = found["acme__calc-nopatch"]
    assert none.steps == [] and none.outcome.reward == 0.0 and none.outcome.verification is not None
    assert none.outcome.verification.details["FAIL_TO_PASS"] == dict.fromkeys(F2P, "FAILED")
    assert none.outcome.verification.details["PASS_TO_PASS_not_passing"] == {}

    # The task's repository holds the base commit's history and not the fix that came later.
    template = Path(gold.task.metadata["template"])
    assert git(template, "rev-parse", "HEAD").strip() == base
    assert git(template, "log", "--all", "--format=%s").split("\n")[:-1] == ["calc with a bug"]


def test_export_then_load_round_trip_of_an_embedded_task(tmp_path: Path) -> None:
    spec = next(s for s in embedded_tasks("swe") if s.id == "webcolors-0")
    tasks = tmp_path / "tasks.jsonl"
    line = {"id": spec.id, "instruction": spec.task.instruction, "metadata": spec.task.metadata,
            "actions": spec.actions, "verifier": spec.task.verifier}  # fmt: skip
    tasks.write_text(json.dumps(line) + "\n")
    out = tmp_path / "bench" / "swe.jsonl"
    assert main(["--export-swebench", str(out), "--tasks", str(tasks)]) == 0
    (exported,) = [json.loads(text) for text in out.read_text().splitlines()]
    template = task_template(spec.task.metadata, default_cache_dir())
    assert exported["repo"] == "agentworld/webcolors" and exported["test_patch"] == ""
    assert exported["base_commit"] == git(template, "rev-parse", "HEAD").strip()
    assert json.loads(exported["FAIL_TO_PASS"]) == spec.task.verifier["FAIL_TO_PASS"]
    assert exported["patch"].startswith("diff --git a/src/webcolors/html5.py b/src/webcolors/html5.py")
    assert (tmp_path / "bench" / "swe-repos" / "agentworld__webcolors" / "HEAD").is_file()

    found = collect(tmp_path / "out", "--swebench", str(out), "--cache-dir", str(tmp_path / "cache"))
    loaded = found["webcolors-0"]
    assert [step.action.kind for step in loaded.steps] == ["edit", "bash"]
    assert loaded.steps[-1].observation.data["exit_status"] == 0
    assert loaded.outcome.reward == 1.0 and loaded.outcome.verification is not None
    assert loaded.task.verifier["PASS_TO_PASS"] == spec.task.verifier["PASS_TO_PASS"]

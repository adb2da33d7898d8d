"""The `swe_tests` verifier through the real runner: an embedded task (webcolors, the fastest suite)
in the real SWE sandbox under bwrap, its verifier's tests run there after the episode. The oracle
(the task's scripted fix) scores 1; no fix, a fix that breaks a passing test, and a "fix" that edits
the failing tests instead of the source all score 0. So do an agent's tools planted for the verifier
to run: a `python3` early on its PATH, a pytest plugin loaded from its Python user site, a git
filter that would rewrite the test files as they are put back."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pytest

from collectors.tasks import TaskSpec, embedded_tasks
from sandboxes.swe import SweSandbox, make_config, parse_action
from sandboxes.swe.repos import default_cache_dir
from sandboxes.swe.verify import (
    PatchError,
    base_commit,
    node_files,
    parse_summary,
    patch_files,
    restored_files,
    score,
    verifier_command,
)
from schemas.records import Trajectory
from tests.sandboxes.scripted_runs import run_scripted

TASK = "webcolors-0"
# A passing test's code path, broken (normalize_hex no longer lowercases).
BREAK_PASSING = {
    "command": "str_replace",
    "path": "src/webcolors/normalization.py",
    "old_str": '    return f"#{hex_digits.lower()}"',
    "new_str": '    return f"#{hex_digits}"',
}
# Every assertion of the failing tests' file made true: what restoring the test files undoes.
CHEAT = "sed -i 's/^\\( *\\)assert /\\1assert True or /' tests/test_html5.py"
# A conftest.py that reports every test as passed: what restoring pytest's harness undoes.
HOOK = (
    "printf '%s\\n' 'import pytest' '@pytest.hookimpl(hookwrapper=True)' "
    "'def pytest_runtest_makereport(item, call):' '    report = (yield).get_result()' "
    "'    report.outcome = \"passed\"' > tests/conftest.py"
)

# A python3 in ~/.local/bin (first on the agent's PATH) that reports every failed test as passed.
FAKE_PYTHON = (
    "mkdir -p ~/.local/bin && printf '%s\\n' '#!/bin/sh'"
    ' \'/usr/bin/python3 "$@" 2>&1 | sed "s/^FAILED \\\\([^ ]*\\\\).*/PASSED \\\\1/"\''
    " > ~/.local/bin/python3 && chmod +x ~/.local/bin/python3"
)
# A usercustomize in the user site that makes every pytest load a plugin passing every test.
USER_SITE = (
    "d=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p \"$d\""
    " && printf '%s\\n' 'import os' 'os.environ[\"PYTEST_PLUGINS\"] = \"agenthook\"'"
    ' > "$d/usercustomize.py"'
    " && printf '%s\\n' 'import pytest' '@pytest.hookimpl(hookwrapper=True)'"
    " 'def pytest_runtest_makereport(item, call):' '    report = (yield).get_result()'"
    " '    report.outcome = \"passed\"' '    report.longrepr = None' > \"$d/agenthook.py\""
)
# A smudge filter that would turn every assertion of the test files true as git checks them out.
SMUDGE = (
    "printf '%s\\n' '#!/bin/sh' 'exec sed \"s/^\\\\( *\\\\)assert /\\\\1assert True or /\"' > ~/evil.sh"
    " && chmod +x ~/evil.sh && git config filter.evil.smudge ~/evil.sh && git config filter.evil.clean cat"
    " && echo 'tests/*.py filter=evil' > .gitattributes && rm tests/test_html5.py"
    " && git checkout -- tests/test_html5.py && grep -c 'assert True or' tests/test_html5.py"
)


def variant(new_id: str, actions: list[dict]) -> TaskSpec:
    spec = copy.deepcopy(next(s for s in embedded_tasks("swe") if s.id == TASK))
    spec.task.id = new_id
    spec.actions = actions
    return spec


def run(out: Path, specs: list[TaskSpec]) -> dict[str, Trajectory]:
    if shutil.which("bwrap") is None:
        pytest.fail("bwrap is not installed (apt-get install bubblewrap)")
    config = make_config("bwrap", cache_dir=default_cache_dir())
    summary, found = run_scripted("swe", lambda: SweSandbox(config), parse_action, specs, out, max_steps=10)
    assert summary.outcomes == {"completed": len(specs)}, summary.outcomes
    return found


def test_oracle_scores_one_and_wrong_end_states_score_zero(tmp_path: Path) -> None:
    oracle = next(s for s in embedded_tasks("swe") if s.id == TASK)
    run_tests, fix, _ = oracle.actions
    specs = [
        oracle,
        variant("no-fix", [run_tests]),
        variant("breaks-a-passing-test", [fix, {"kind": "edit", "arguments": BREAK_PASSING}]),
        variant("edits-the-tests", [{"kind": "bash", "arguments": {"command": CHEAT}}, run_tests]),
        variant("hooks-the-reports", [{"kind": "bash", "arguments": {"command": HOOK}}, run_tests]),
    ]
    found = run(tmp_path / "out", specs)
    verifier = oracle.task.verifier
    n_f2p, n_p2p = len(verifier["FAIL_TO_PASS"]), len(verifier["PASS_TO_PASS"])

    good = found[TASK].outcome
    assert good.reward == 1.0 and good.verification is not None
    assert good.verification.verifier == "swe_tests" and good.verification.error == ""
    assert set(good.verification.details["FAIL_TO_PASS"].values()) == {"PASSED"}
    assert good.verification.details["PASS_TO_PASS_not_passing"] == {}
    assert good.verification.details["fraction_passing"] == 1.0
    assert f"{n_f2p + n_p2p} passed" in good.verification.output
    assert 0 < good.verification.elapsed_s < 60

    unfixed = found["no-fix"].outcome.verification
    assert found["no-fix"].outcome.reward == 0.0 and unfixed is not None
    assert set(unfixed.details["FAIL_TO_PASS"].values()) == {"FAILED"}
    assert unfixed.details["passed"] == n_p2p and unfixed.details["total"] == n_f2p + n_p2p

    broken = found["breaks-a-passing-test"].outcome.verification
    assert found["breaks-a-passing-test"].outcome.reward == 0.0 and broken is not None
    assert set(broken.details["FAIL_TO_PASS"].values()) == {"PASSED"}
    lowercase = "tests/test_normalization.py::NormalizationTests::test_normalize_hex"
    assert lowercase in broken.details["PASS_TO_PASS_not_passing"]
    assert 0 < broken.details["fraction_passing"] < 1

    # The cheat made the agent's own test run pass, but the verifier ran the task's tests.
    cheat = found["edits-the-tests"]
    assert cheat.steps[-1].observation.data["exit_status"] == 0
    assert cheat.outcome.reward == 0.0 and cheat.outcome.verification is not None
    assert set(cheat.outcome.verification.details["FAIL_TO_PASS"].values()) == {"FAILED"}
    hook = found["hooks-the-reports"]
    assert hook.steps[-1].observation.data["exit_status"] == 0, hook.steps[-1].observation.text[-2000:]
    assert hook.outcome.reward == 0.0
    assert set(hook.outcome.verification.details["FAIL_TO_PASS"].values()) == {"FAILED"}


def test_every_embedded_task_has_a_swe_tests_verifier() -> None:
    for spec in embedded_tasks("swe"):
        verifier = spec.task.verifier
        assert verifier["kind"] == "swe_tests", spec.id
        assert verifier["FAIL_TO_PASS"], spec.id
        assert not set(verifier["FAIL_TO_PASS"]) & set(verifier["PASS_TO_PASS"]), spec.id
        assert "-x" not in verifier["test_command"] and "-rfEpxX" in verifier["test_command"]


SUMMARY = """\
F.x
=========================== short test summary info ============================
PASSED tests/test_a.py::test_one
PASSED tests/test_a.py::test_param[a - b]
XFAIL tests/test_a.py::test_known - not yet
FAILED tests/test_a.py::TestB::test_two - AssertionError: assert 1 == 2
ERROR tests/test_c.py - ImportError: no module
1 failed, 2 passed, 1 xfailed, 1 error in 0.12s
"""


def test_summary_parsing_and_scoring() -> None:
    results = parse_summary(SUMMARY)
    assert results == {
        "tests/test_a.py::test_one": "PASSED",
        "tests/test_a.py::test_param[a - b]": "PASSED",
        "tests/test_a.py::test_known": "XFAIL",
        "tests/test_a.py::TestB::test_two": "FAILED",
        "tests/test_c.py": "ERROR",
    }
    reward, details = score(results, ["tests/test_a.py::test_one"], ["tests/test_a.py::test_known"])
    assert reward == 1.0 and details["fraction_passing"] == 1.0
    reward, details = score(results, ["tests/test_a.py::TestB::test_two"], ["tests/test_c.py::test_x"])
    assert reward == 0.0 and details["passed"] == 0
    assert details["PASS_TO_PASS_not_passing"] == {"tests/test_c.py::test_x": "missing"}
    reward, details = score(results, ["tests/test_a.py::test_one", "tests/test_a.py::TestB::test_two"], [])
    assert reward == 0.0 and details["fraction_passing"] == 0.5
    assert verifier_command(["python3", "-m", "pytest", "-x", "tests"]) == verifier_command(
        verifier_command(["python3", "-m", "pytest", "tests"])
    )
    assert node_files(["a/t.py::x", "a/t.py::y[1]", "b.py::z"]) == ["a/t.py", "b.py"]
    patch = "diff --git a/t/x.py b/t/x.py\n--- a/t/x.py\n+++ b/t/x.py\n@@\ndiff --git a/n.py b/n.py\n"
    patch += "new file mode 100644\n--- /dev/null\n+++ b/n.py\n"
    assert patch_files(patch) == ["n.py", "t/x.py"]


def test_tools_the_agent_planted_for_the_verifier_earn_nothing(tmp_path: Path) -> None:
    oracle = next(s for s in embedded_tasks("swe") if s.id == TASK)
    run_tests = oracle.actions[0]
    commands = {"fake-python3": FAKE_PYTHON, "user-site-plugin": USER_SITE, "smudge-filter": SMUDGE}
    plant = {
        label: {"kind": "bash", "arguments": {"command": command}} for label, command in commands.items()
    }
    specs = [variant(label, [action, run_tests]) for label, action in plant.items()]
    found = run(tmp_path / "out", specs)
    for label in plant:
        trajectory = found[label]
        planted, agents_run = (step.observation for step in trajectory.steps)
        assert planted.data["exit_status"] == 0, planted.text[-2000:]
        verification = trajectory.outcome.verification
        assert trajectory.outcome.reward == 0.0 and verification is not None, (label, verification)
        assert set(verification.details["FAIL_TO_PASS"].values()) == {"FAILED"}, (label, verification.output)
        if label != "smudge-filter":  # the agent's own test run was fooled
            assert agents_run.data["exit_status"] == 0 or "PASSED" in agents_run.text, agents_run.text[-2000:]


def test_restored_files_come_from_the_template_with_the_test_patch_applied(tmp_path: Path) -> None:
    """Real git: the base's files, read from the template's own repository, and the test patch
    (which edits a helper no test id names, adds a test file, deletes another) applied outside it."""
    template = tmp_path / "template"
    (template / "tests").mkdir(parents=True)
    files = {"tests/test_a.py": "def test_a():\n    assert 1\n", "tests/helpers.py": "X = 1\n"}
    files["tests/test_gone.py"] = "def test_gone():\n    pass\n"
    for name, text in files.items():
        (template / name).write_text(text)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env.update(GIT_COMMITTER_EMAIL="t@t", PATH="/usr/bin:/bin", HOME=str(tmp_path))
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", "-C", str(template), *argv], check=True, env=env)
    (template / "tests" / "helpers.py").write_text("X = 2\n")
    (template / "tests" / "test_new.py").write_text("def test_new():\n    pass\n")
    (template / "tests" / "test_gone.py").unlink()
    subprocess.run(["git", "-C", str(template), "add", "-A"], check=True, env=env)
    patch = subprocess.run(
        ["git", "-C", str(template), "diff", "--cached"], check=True, env=env, capture_output=True, text=True
    ).stdout
    subprocess.run(["git", "-C", str(template), "reset", "-q", "--hard"], check=True, env=env)
    into = tmp_path / "scratch" / "files"
    into.mkdir(parents=True)
    names = sorted({"tests/test_a.py", *patch_files(patch)})
    absent = restored_files(template, base_commit(template), names, patch, into)
    assert absent == ["tests/test_gone.py"]
    assert (into / "tests" / "helpers.py").read_text() == "X = 2\n"
    assert (into / "tests" / "test_new.py").is_file()
    assert (into / "tests" / "test_a.py").read_text() == files["tests/test_a.py"]
    with pytest.raises(PatchError, match="patch does not apply"):
        restored_files(
            template, base_commit(template), names, patch.replace("X = 1", "X = 9"), tmp_path / "x"
        )

"""SWE tasks from the embedded suite: one task per (repository, seed), carrying its mutation, the
scripted fix (run the tests, revert the mutation with one str_replace, run the tests again) and its
`swe_tests` verifier, whose FAIL_TO_PASS and PASS_TO_PASS come from two real runs of the whole test
suite: unmutated and mutated."""

from __future__ import annotations

import functools
import shlex
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from collectors.tasks import TaskSpec
from sandboxes.swe.mutation import Mutation, revert_patch
from sandboxes.swe.mutation_tests import run_tests
from sandboxes.swe.repos import RepoError, RepoSpec, load_mutation, prepare_repo, task_template
from sandboxes.swe.verify import PASSING, SWE_TESTS, parse_summary, verifier_command


def instruction(spec: RepoSpec) -> str:
    return (
        f"The test suite of {spec.name} {spec.version} fails: its source code has a bug. "
        f"Find the bug and fix the source so that the tests pass (`{shlex.join(spec.test_command)}`); "
        "do not change the tests."
    )


def task_line(spec: RepoSpec, seed: int, mutation: Mutation, verifier: dict[str, Any]) -> dict[str, Any]:
    """One tasks.jsonl object; its scripted actions make a successful episode."""
    test_run = {"kind": "bash", "arguments": {"command": shlex.join(spec.test_command)}}
    return {
        "id": f"{spec.name}-{seed}",
        "instruction": instruction(spec),
        "metadata": {
            "repo": spec.name,
            "version": spec.version,
            "seed": seed,
            "test_command": list(spec.test_command),
            "test_timeout_s": spec.test_timeout_s,
            "mutation": mutation.as_dict(),
        },
        "actions": [test_run, {"kind": "edit", "arguments": revert_patch(mutation)}, test_run],
        "verifier": verifier,
    }


def _test_results(repo: Path, command: list[str], timeout_s: float) -> dict[str, str]:
    """{node id: status} of one run of the whole suite, in a scratch copy (the cache stays clean)."""
    with tempfile.TemporaryDirectory(prefix="agentworld-swe-verifier-") as scratch:
        copy = Path(scratch) / "repo"
        shutil.copytree(repo, copy, symlinks=True)
        run = run_tests(copy, command, timeout_s)
    if run.timed_out:
        raise RepoError(f"the tests of {repo} timed out after {timeout_s:.0f} s")
    return parse_summary(run.output)


def _timeout(spec: RepoSpec) -> float:
    # The verifier runs every test, not up to the first failure (`-x`) as the task's command does.
    return 2 * spec.test_timeout_s


@functools.lru_cache(maxsize=64)
def _clean_results(spec: RepoSpec, cache_dir: Path) -> dict[str, str]:
    return _test_results(prepare_repo(spec, cache_dir), verifier_command(spec.test_command), _timeout(spec))


def swe_tests_verifier(spec: RepoSpec, template: Path, cache_dir: Path) -> dict[str, Any]:
    """The task's verifier: FAIL_TO_PASS are the tests that pass unmutated and not mutated,
    PASS_TO_PASS the ones that pass in both (a test that fails or skips unmutated is in neither)."""
    command = verifier_command(spec.test_command)
    clean = _clean_results(spec, Path(cache_dir))
    mutated = _test_results(template, command, _timeout(spec))
    passing = sorted(test for test, status in clean.items() if status in PASSING)
    fail_to_pass = [test for test in passing if mutated.get(test) not in PASSING]
    if not fail_to_pass:
        raise RepoError(f"{template.name}: no test that passes unmutated fails with the mutation")
    return {
        "kind": SWE_TESTS,
        "test_command": command,
        "timeout_s": _timeout(spec),
        "FAIL_TO_PASS": fail_to_pass,
        "PASS_TO_PASS": [test for test in passing if mutated.get(test) in PASSING],
    }


def build_task(
    spec: RepoSpec, seed: int, cache_dir: Path, mutation: Mutation | None = None
) -> dict[str, Any]:
    """Prepare (or reuse) the mutated template of spec and seed (with `mutation` when the task
    records one, else the seed's); its task line."""
    metadata: dict[str, Any] = {"repo": spec.name, "version": spec.version, "seed": seed}
    if mutation is not None:
        metadata["mutation"] = mutation.as_dict()
    template = task_template(metadata, cache_dir)
    return task_line(spec, seed, load_mutation(template), swe_tests_verifier(spec, template, cache_dir))


def templates_for(tasks: Iterable[TaskSpec], cache_dir: Path) -> list[Path]:
    """The prepared repository of each task that names one (tasks with a `template` need none)."""
    return [
        task_template(spec.task.metadata, cache_dir)
        for spec in tasks
        if not spec.task.metadata.get("template")
    ]

"""Repositories from PyPI: a real `pip download` of one small project of the suite into a
module-scoped cache, its git repository, its mutated task template, and the SWE sandbox on it."""

from __future__ import annotations

import shlex
import shutil
import threading
import time
from pathlib import Path

import pytest

from sandboxes.swe import SweSandbox, bash_action, make_config, parse_action
from sandboxes.swe.mutation import git, revert_patch, run_tests
from sandboxes.swe.repos import (
    RepoError,
    RepoSpec,
    embedded_suite,
    load_mutation,
    prepare_repo,
    spec_for,
    task_template,
)
from schemas.records import Task
from tests.sandboxes.swe.git_checks import changed_files, commits_in_object_store

NAME = "webcolors"  # the fastest test suite of the embedded ones (about 0.2 s)


@pytest.fixture(scope="module")
def spec() -> RepoSpec:
    return embedded_suite()[NAME]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory, spec: RepoSpec) -> Path:
    """A cache holding the real download; the first prepare is timed in test_cache_reuse."""
    return tmp_path_factory.mktemp("swe-cache")


@pytest.fixture(scope="module")
def first_prepare(cache: Path, spec: RepoSpec) -> tuple[Path, float]:
    started = time.monotonic()
    repo = prepare_repo(spec, cache)
    return repo, time.monotonic() - started


def metadata(spec: RepoSpec, seed: int) -> dict:
    return {"repo": spec.name, "version": spec.version, "seed": seed, "test_command": list(spec.test_command)}


def test_embedded_suite_is_pinned_and_large_enough() -> None:
    suite = embedded_suite()
    assert len(suite) >= 20
    for spec in suite.values():
        assert spec.version[0].isdigit() and spec.test_command[:1] in (("python3",), ("env",))
        assert spec.source and 0 < spec.test_timeout_s <= 120


def test_prepare_gives_one_reproducible_commit(
    first_prepare: tuple[Path, float], cache: Path, spec: RepoSpec
) -> None:
    repo, _ = first_prepare
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / "src" / "webcolors").is_dir() and (repo / "tests").is_dir()
    assert run_tests(repo, spec.test_command, spec.test_timeout_s).exit_status == 0
    # The same sdist unpacked in another cache gives the same commit id (fixed identity and dates).
    other = cache.parent / "other-cache"
    shutil.copytree(cache / "sdists", other / "sdists")
    again = prepare_repo(spec, other)
    assert git(again, "rev-parse", "HEAD") == git(repo, "rev-parse", "HEAD")


def test_cache_reuse_is_fast_and_identical(
    first_prepare: tuple[Path, float], cache: Path, spec: RepoSpec
) -> None:
    repo, first_s = first_prepare
    head = git(repo, "rev-parse", "HEAD")
    started = time.monotonic()
    assert prepare_repo(spec, cache) == repo
    second_s = time.monotonic() - started
    assert git(repo, "rev-parse", "HEAD") == head
    assert second_s < 0.5 and second_s < first_s / 10, (first_s, second_s)


def test_unavailable_package_names_the_problem(tmp_path: Path) -> None:
    missing = RepoSpec(NAME, "0.0.0.404", ("python3", "-m", "pytest"))
    with pytest.raises(
        RepoError, match=r"cannot download the sdist of webcolors==0\.0\.0\.404 from PyPI.*pip index"
    ):
        prepare_repo(missing, tmp_path)
    assert not (tmp_path / "repos" / missing.key).exists()


def test_broken_archive_and_bad_metadata_are_clear_errors(tmp_path: Path, spec: RepoSpec) -> None:
    broken = RepoSpec("broken", "1.0", ("python3", "-m", "pytest"))
    (tmp_path / "sdists" / broken.key).mkdir(parents=True)
    (tmp_path / "sdists" / broken.key / "broken-1.0.tar.gz").write_bytes(b"not a tarball")
    with pytest.raises(RepoError, match="cannot unpack"):
        prepare_repo(broken, tmp_path)
    assert not (tmp_path / "repos" / broken.key).exists()
    with pytest.raises(RepoError, match="'repo' and 'version'"):
        task_template({"seed": 0}, tmp_path)
    with pytest.raises(RepoError, match="not in the embedded suite"):
        task_template({"repo": "unknown-project", "version": "1.0", "seed": 0}, tmp_path)
    with pytest.raises(RepoError, match="integer 'seed'"):
        task_template({"repo": spec.name, "version": spec.version, "seed": "0"}, tmp_path)


def test_template_is_mutated_cached_and_safe_for_concurrent_callers(
    first_prepare: tuple[Path, float], cache: Path, spec: RepoSpec
) -> None:
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(task_template(metadata(spec, 0), cache)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert len(results) == 3 and len(set(results)) == 1
    template = results[0]
    assert sorted(p.name for p in template.parent.iterdir() if not p.name.endswith(".json")) == [
        template.name
    ]
    assert commits_in_object_store(template) == 1  # neither the history nor the reflog shows the bug
    found = load_mutation(template)
    assert changed_files(prepare_repo(spec, cache), template) == [found.file]
    assert not found.file.startswith("tests/")
    assert run_tests(template, spec.test_command, spec.test_timeout_s).failed
    # The task records its mutation; a different one is refused, naming what to delete.
    recorded = {**metadata(spec, 0), "mutation": found.as_dict()}
    assert task_template(recorded, cache) == template
    wrong = {**found.as_dict(), "line": found.line + 1}
    with pytest.raises(RepoError, match="delete"):
        task_template({**metadata(spec, 0), "mutation": wrong}, cache)
    assert spec_for(metadata(spec, 0)) == spec


def test_recorded_mutation_is_applied_as_recorded(
    first_prepare: tuple[Path, float], cache: Path, spec: RepoSpec
) -> None:
    """A task that records its bug gets that bug whatever its seed would pick (the seed's search
    depends on which lines the tests cover, which differs between machines)."""
    searched = task_template(metadata(spec, 0), cache)
    found = load_mutation(searched)
    replayed = task_template({**metadata(spec, 7), "mutation": found.as_dict()}, cache)
    assert replayed != searched and load_mutation(replayed) == found
    assert git(replayed, "rev-parse", "HEAD") == git(searched, "rev-parse", "HEAD")
    assert commits_in_object_store(replayed) == 1

    absent = {**found.as_dict(), "original": "no such line in the sdist"}
    with pytest.raises(RepoError, match="does not apply"):
        task_template({**metadata(spec, 8), "mutation": absent}, cache)
    harmless = {**found.as_dict(), "mutated": found.original}
    with pytest.raises(RepoError, match="makes no test fail"):
        task_template({**metadata(spec, 9), "mutation": harmless}, cache)
    outside = {**found.as_dict(), "file": "../../../outside.py"}
    with pytest.raises(RepoError, match="outside the repository"):
        task_template({**metadata(spec, 9), "mutation": outside}, cache)
    with pytest.raises(RepoError, match="fields of a Mutation"):
        task_template({**metadata(spec, 9), "mutation": {"file": found.file}}, cache)
    templates = sorted(p.name for p in (cache / "templates").iterdir() if not p.name.endswith(".json"))
    assert not [name for name in templates if "-seed8-" in name or "-seed9-" in name]


def test_sandbox_runs_the_failing_tests_and_the_revert_fixes_them(cache: Path, spec: RepoSpec) -> None:
    task = Task(id=f"{NAME}-0", instruction="make the tests pass", metadata=metadata(spec, 0))
    found = load_mutation(task_template(task.metadata, cache))
    test_run = bash_action(shlex.join(spec.test_command), timeout_s=120)
    with SweSandbox(make_config("auto", cache_dir=cache)) as sandbox:
        first = sandbox.reset(task)
        assert first.text.startswith(f"Repository {NAME} {spec.version} at ")
        failing = sandbox.step(test_run).observation
        assert failing.data["exit_status"] == 1, failing.text[-2000:]
        fixed = sandbox.step(parse_action("edit", revert_patch(found))).observation
        assert fixed.data["error"] == "" and fixed.data["diff"], fixed.text
        passing = sandbox.step(test_run).observation
        assert passing.data["exit_status"] == 0, passing.text[-2000:]
        assert "passed" in passing.text
    template = task_template(task.metadata, cache)
    assert git(template, "status", "--porcelain") == ""  # the sandbox edited a copy

"""The seeded mutation step on a real git repository written by the test, with real pytest runs
(Debian's python3, under bwrap when it works here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandboxes.swe.mutation import (
    Mutation,
    MutationError,
    git,
    mutate,
    revert_patch,
    run_tests,
    unique_context,
)
from sandboxes.swe.mutation_sites import find_sites, source_files
from tests.sandboxes.swe.git_checks import changed_files, commits_in_object_store, write_repository

CALC = '''"""A tiny calculator."""


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def total(values):
    result = 0
    for value in values:
        result += value
    return result


def window(items, size):
    return items[:size]


def both(a, b):
    return a and b


def scale(x):
    return x * 3 - 1


def never_tested(x):
    return x + 100
'''
TESTS = """from calc import both, clamp, scale, total, window


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-1, 0, 3) == 0
    assert clamp(2, 0, 3) == 2
    assert clamp(0, 0, 3) == 0


def test_total():
    assert total([1, 2, 3]) == 6


def test_window():
    assert window([1, 2, 3, 4], 2) == [1, 2]


def test_both():
    assert both(True, False) is False
    assert both(True, True) is True


def test_scale():
    assert scale(2) == 5
"""
COMMAND = ("python3", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = {"calc.py": CALC, "tests/test_calc.py": TESTS, "setup.py": "VERSION = 1 + 1\n"}
    repo = write_repository(tmp_path_factory.mktemp("mutation") / "calc", files, "calc 1.0")
    assert run_tests(repo, COMMAND, 60).exit_status == 0
    return repo


def copy_of(base: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(base, target, symlinks=True)
    return target


def test_sites_cover_every_kind_and_never_the_tests(base: Path) -> None:
    assert source_files(base) == ["calc.py"]  # not tests/test_calc.py, not setup.py
    sites = find_sites(base)
    kinds = {site.kind for site in sites}
    assert kinds == {"compare", "arithmetic", "boolean", "constant", "slice", "remove_branch", "return"}
    text = (base / "calc.py").read_text()
    for site in sites:  # every span is the exact source of what it replaces
        assert text[site.start : site.end] != site.replacement
    compare = [s for s in sites if s.kind == "compare" and s.operator == "< -> <="]
    assert len(compare) == 1 and text[compare[0].start : compare[0].end] == "<" and compare[0].line == 5


def test_same_seed_same_mutation_and_commit(base: Path, tmp_path: Path) -> None:
    first, second = copy_of(base, tmp_path, "a"), copy_of(base, tmp_path, "b")
    one, two = mutate(first, 7, COMMAND, 60), mutate(second, 7, COMMAND, 60)
    assert one == two
    assert git(first, "rev-parse", "HEAD") == git(second, "rev-parse", "HEAD")
    assert commits_in_object_store(first) == 1  # neither the history nor the reflog shows the bug
    # the mutation is the whole difference from the original, in the source file only
    assert changed_files(base, first) == [one.file] == ["calc.py"]
    assert git(first, "status", "--porcelain") == ""  # test runs left nothing behind
    others = {
        mutate(copy_of(base, tmp_path, f"s{seed}"), seed, COMMAND, 60).description for seed in (1, 2, 3)
    }
    assert len(others | {one.description}) >= 2, "different seeds should usually give different bugs"


def test_mutation_fails_a_test_and_revert_patch_undoes_it(base: Path, tmp_path: Path) -> None:
    repo = copy_of(base, tmp_path, "repo")
    found = mutate(repo, 11, COMMAND, 60)
    assert found.line not in range(30, 33), "never_tested() is not run by the tests: no site there"
    failing = run_tests(repo, COMMAND, 60)
    assert failing.exit_status == 1 and "failed" in failing.output
    patch = revert_patch(found.as_dict())
    assert patch["command"] == "str_replace" and patch["path"] == "calc.py"
    text = (repo / "calc.py").read_text()
    assert text.count(patch["old_str"]) == 1
    (repo / "calc.py").write_text(text.replace(patch["old_str"], patch["new_str"]))
    assert (repo / "calc.py").read_text() == CALC
    assert run_tests(repo, COMMAND, 60).exit_status == 0
    assert Mutation.from_json(found.to_json()) == found


def test_untested_source_gives_a_clear_error(tmp_path: Path) -> None:
    files = {
        "lib.py": "def f(x):\n    return x + 1\n",
        "tests/test_nothing.py": "def test_nothing():\n    assert True\n",
    }
    repo = write_repository(tmp_path / "untested", files, "untested")
    with pytest.raises(MutationError, match="none of .* candidate mutations made a test fail"):
        mutate(repo, 0, COMMAND, 60, max_tries=3)
    assert git(repo, "status", "--porcelain") == "" and (repo / "lib.py").read_text().endswith("x + 1\n")


def test_unique_context_grows_until_unique() -> None:
    # `+` -> `-` makes the line the same as the one above: one line alone would not be unique.
    text = "a = 1\n    x = y - 1\nb = 2\n    x = y + 1\n"
    start = text.index("+")
    original, mutated = unique_context(text, start, start + 1, "-")
    assert mutated == "b = 2\n    x = y - 1" and (text[:start] + "-" + text[start + 1 :]).count(mutated) == 1
    assert original.replace("+", "-", 1) == mutated


def test_unique_context_counts_what_str_replace_searches() -> None:
    # "    return None" alone also matches inside the deeper "        return None" line.
    text = "def f(x):\n    if x:\n        return None\n    return x\n"
    start = text.rindex("x\n")
    original, mutated = unique_context(text, start, start + 1, "None")
    assert mutated == "        return None\n    return None"
    assert original == "        return None\n    return x"


def test_test_run_is_bounded(tmp_path: Path) -> None:
    run = run_tests(tmp_path, ("python3", "-c", "while True: pass"), 1)
    assert run.timed_out and run.exit_status is None and not run.failed
    assert run.duration_s < 15

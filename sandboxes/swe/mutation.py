"""The seeded bug: one small edit of a repository's source that makes at least one of its tests fail.

Sites are found with `ast` in the source files (never the tests): a comparison operator swapped, an
arithmetic operator swapped, an integer constant or slice bound off by one, `and`/`or` swapped, an
if-body replaced by `pass`, a returned value replaced by None. The edit rewrites only the exact
source span of the site, so undoing it is one `str_replace` of a few whole lines (`revert_patch`).
Candidates are tried in an order drawn from the seed until one makes the test command fail (at most
`max_tries` test runs). The kept edit is amended into the repository's one commit (same fixed
identity and dates), so the history does not give the bug away. Same repository, same seed, same
covered lines: same mutation and commit id. A task that records its mutation is rebuilt with
`apply_recorded`, which does not depend on coverage.
"""

from __future__ import annotations

import ast
import json
import random
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sandboxes.swe.mutation_sites import Site, find_sites
from sandboxes.swe.mutation_tests import TestRun, executed_lines, run_tests

MAX_TRIES = 20
DEFAULT_TEST_COMMAND = ("python3", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider")
# Fixed identity and dates: the same edit on the same repository gives the same commit id.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "agentworld",
    "GIT_AUTHOR_EMAIL": "agentworld@example.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "agentworld",
    "GIT_COMMITTER_EMAIL": "agentworld@example.invalid",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/nonexistent",
    "LC_ALL": "C",
}


class MutationError(RuntimeError):
    """No candidate edit made a test fail within the bound, or the clean tests already fail."""


@dataclass(frozen=True)
class Mutation:
    """The injected bug. `original` and `mutated` are the whole lines around the edit, as many as
    make `mutated` unique in the mutated file: replacing `mutated` by `original` undoes the bug."""

    file: str
    line: int
    operator: str
    original: str
    mutated: str
    description: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Mutation:
        return cls(**json.loads(text))


def revert_patch(mutation: Mutation | dict[str, Any]) -> dict[str, str]:
    """The `edit` tool arguments that undo the mutation (the scripted policy's fix)."""
    found = mutation if isinstance(mutation, Mutation) else Mutation(**mutation)
    return {
        "command": "str_replace",
        "path": found.file,
        "old_str": found.mutated,
        "new_str": found.original,
    }


def git(repo: Path, *args: str) -> str:
    """Run git in repo with the fixed identity; raises MutationError with git's message."""
    result = subprocess.run(
        ["git", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", *args],
        cwd=repo,
        env=GIT_ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise MutationError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout


def unique_context(text: str, start: int, end: int, replacement: str) -> tuple[str, str]:
    """(original, mutated) whole-line snippets around text[start:end] -> replacement, grown a line at
    a time (below first, then above) until the mutated snippet occurs once in the mutated text."""
    mutated_text = text[:start] + replacement + text[end:]
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    first = max(i for i, off in enumerate(offsets[:-1]) if off <= start)
    last = max(i for i, off in enumerate(offsets[:-1]) if off < end) if end > start else first
    delta = len(replacement) - (end - start)
    while True:
        original = text[offsets[first] : offsets[last + 1]].rstrip("\n")
        mutated = mutated_text[offsets[first] : offsets[last + 1] + delta].rstrip("\n")
        # Counted without the newline, as the str_replace will search for it: "    return None"
        # is also inside "        return None".
        if mutated_text.count(mutated) == 1 or (first == 0 and last == len(lines) - 1):
            return original, mutated
        if last + 1 < len(lines) and (last - first) % 2 == 0:
            last += 1
        elif first > 0:
            first -= 1
        else:
            last += 1


def apply_site(repo: Path, site: Site) -> Mutation:
    """Write the site's edit into its file; the Mutation that undoes it."""
    path = repo / site.file
    text = path.read_text(encoding="utf-8")
    new_text = text[: site.start] + site.replacement + text[site.end :]
    try:
        ast.parse(new_text)
    except SyntaxError as exc:
        raise MutationError(f"{site.description} does not parse: {exc}") from exc
    original, mutated = unique_context(text, site.start, site.end, site.replacement)
    path.write_text(new_text, encoding="utf-8")
    return Mutation(
        file=site.file,
        line=site.line,
        operator=site.operator,
        original=original,
        mutated=mutated,
        description=site.description,
    )


def candidate_order(sites: list[Site], rng: random.Random) -> list[Site]:
    """Sites in a seeded order that alternates between kinds of mutation, so integer constants (the
    most common site) do not crowd out the others."""
    by_kind: dict[str, list[Site]] = {}
    for site in sites:
        by_kind.setdefault(site.kind, []).append(site)
    for group in by_kind.values():
        rng.shuffle(group)
    order: list[Site] = []
    while by_kind:
        kind = rng.choice(sorted(by_kind))
        order.append(by_kind[kind].pop())
        if not by_kind[kind]:
            del by_kind[kind]
    return order


def mutate(
    repo: Path,
    seed: int,
    test_command: Sequence[str] = DEFAULT_TEST_COMMAND,
    test_timeout_s: float = 60.0,
    source: Sequence[str] = (),
    max_tries: int = MAX_TRIES,
) -> Mutation:
    """Inject the seed's mutation into the committed repository at `repo`, amending its one commit."""
    repo = Path(repo)
    sites = find_sites(repo, source)
    if not sites:
        raise MutationError(f"no mutation sites in the source files of {repo} (source={list(source)})")
    covered = executed_lines(repo, test_command, test_timeout_s, sorted({site.file for site in sites}))
    _restore_untracked(repo)
    if covered:
        # A bug on a line the tests never run cannot make them fail: don't spend test runs on it.
        sites = [site for site in sites if site.line in covered.get(site.file, ())] or sites
    rng = random.Random(f"agentworld-swe-{seed}")
    tried: list[str] = []
    for site in candidate_order(sites, rng):
        if len(tried) >= max_tries:
            break
        try:
            found = apply_site(repo, site)
        except MutationError:
            continue  # e.g. `x - -1`: an edit that does not parse costs no test run
        outcome = run_tests(repo, test_command, test_timeout_s)
        _restore_untracked(repo)
        if outcome.failed:
            _amend_into_commit(repo, site.file)
            return found
        git(repo, "checkout", "--quiet", "--", site.file)
        tried.append(f"{found.description}: {outcome.summary}")
    clean = run_tests(repo, test_command, test_timeout_s)
    _restore_untracked(repo)
    if clean.failed:
        raise MutationError(f"the unmutated tests already fail ({clean.summary}); pick another version")
    raise MutationError(f"none of {len(tried)} candidate mutations made a test fail: " + "; ".join(tried))


def apply_recorded(
    repo: Path,
    recorded: Mutation,
    test_command: Sequence[str] = DEFAULT_TEST_COMMAND,
    test_timeout_s: float = 60.0,
) -> Mutation:
    """Inject a task's recorded mutation into the committed repository at `repo`, as `mutate` would.

    A task that records its bug is rebuilt from the record, not searched for again with its seed:
    the search keeps the lines the tests run, which depend on the machine (which optional modules
    are installed, which tests skip), so the same seed can pick another bug on another machine.
    """
    repo = Path(repo).resolve()
    path = (repo / recorded.file).resolve()
    if not path.is_relative_to(repo):  # task files are data: never write outside the repository
        raise MutationError(f"the recorded mutation's file {recorded.file!r} is outside the repository")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MutationError(f"the recorded mutation's file {recorded.file} cannot be read: {exc}") from exc
    start = _snippet_start(text, recorded.original, recorded.line)
    if start is None:
        raise MutationError(
            f"the recorded mutation ({recorded.description}) does not apply: {recorded.file} has "
            f"no {recorded.original!r} at line {recorded.line}"
        )
    end = start + len(recorded.original)
    path.write_text(text[:start] + recorded.mutated + text[end:], encoding="utf-8")
    outcome = run_tests(repo, test_command, test_timeout_s)
    _restore_untracked(repo)
    if not outcome.failed:
        raise MutationError(
            f"the recorded mutation ({recorded.description}) makes no test fail here: {outcome.summary}"
        )
    _amend_into_commit(repo, recorded.file)
    return recorded


def _snippet_start(text: str, snippet: str, line: int) -> int | None:
    """Offset of the occurrence of snippet whose lines include `line` (1-based), or None."""
    start = text.find(snippet)
    while start >= 0:
        first = text.count("\n", 0, start) + 1
        if first <= line <= first + snippet.count("\n"):
            return start
        start = text.find(snippet, start + 1)
    return None


def _amend_into_commit(repo: Path, file: str) -> None:
    """Fold the edit of `file` into the repository's one commit, leaving no trace of the old one."""
    git(repo, "add", "--", file)
    git(repo, "commit", "--quiet", "--no-verify", "--amend", "--no-edit")
    # The commit it replaced would still answer `git reflog` / `git diff HEAD@{1}`.
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "--quiet", "--prune=now")


def _restore_untracked(repo: Path) -> None:
    """Drop whatever a test run wrote (every file of the sdist is tracked)."""
    git(repo, "clean", "-fdxq")


__all__ = [
    "Mutation",
    "MutationError",
    "TestRun",
    "apply_recorded",
    "git",
    "mutate",
    "revert_patch",
    "run_tests",
]

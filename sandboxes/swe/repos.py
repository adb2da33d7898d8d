"""Repositories for SWE tasks: real sdists from PyPI, unpacked into git repositories, then mutated.

`prepare_repo` downloads `NAME==VERSION` once (`pip download --no-binary NAME --no-deps`) and
unpacks it into a git repository with one commit whose author, committer and dates are fixed, so
the same sdist always gives the same commit id. `task_template` folds the task's mutation (the one
it records, else the seed's) into that one commit, in a copy of the repository, so `git log` and
`git show` do not reveal the bug.
Both results are cached under `cache_dir`, built in a temporary directory and renamed into place,
under a per-entry lock, so concurrent callers (a fleet of sandboxes) build each entry once and never
see a half-built one. Sandboxes copy a template, never modify it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandboxes.cache import cache_root, entry_lock
from sandboxes.swe.mutation import Mutation, MutationError, apply_recorded, git, mutate
from sandboxes.swe.repos_suite import EMBEDDED_SUITE

DOWNLOAD_TIMEOUT_S = 300.0
LOCK_TIMEOUT_S = 900.0  # the longest a caller waits for another one building the same entry


class RepoError(RuntimeError):
    """A repository cannot be prepared (unknown package, no sdist, network, broken archive)."""


@dataclass(frozen=True)
class RepoSpec:
    """A project of the suite: what to download, how to run its tests, where its source is."""

    name: str
    version: str
    test_command: tuple[str, ...]
    test_timeout_s: float = 60.0
    # Files or directories (relative to the repository root) the mutation step may change; empty:
    # every .py file that is not a test, setup or documentation file.
    source: tuple[str, ...] = field(default=())

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "test_command": list(self.test_command),
            "test_timeout_s": self.test_timeout_s,
            "source": list(self.source),
        }


def embedded_suite() -> dict[str, RepoSpec]:
    """The embedded projects by name (sandboxes/swe/repos_suite.py)."""
    return {entry["name"]: RepoSpec(**entry) for entry in EMBEDDED_SUITE}


def default_cache_dir() -> Path:
    return cache_root() / "swe"


def _entry_lock(cache_dir: Path, key: str) -> AbstractContextManager[None]:
    """An exclusive lock on one cache entry, waited for at most LOCK_TIMEOUT_S."""
    lock = cache_dir / "locks" / f"{key}.lock"
    busy = RepoError(
        f"another process has held {lock} for {LOCK_TIMEOUT_S:.0f} s; "
        "if none is running, delete the lock file"
    )
    return entry_lock(lock, LOCK_TIMEOUT_S, busy, poll_s=0.2)


def _publish(built: Path, final: Path) -> None:
    """Move a finished entry into place in one rename (callers hold the entry's lock; a download
    without it may find the entry already there, and then drops its own)."""
    if final.exists():
        shutil.rmtree(built)
    else:
        os.replace(built, final)


def download_sdist(spec: RepoSpec, cache_dir: Path) -> Path:
    """The sdist archive of spec, downloaded from PyPI on first use. RepoError says why not."""
    target = cache_dir / "sdists" / spec.key
    if target.is_dir() and _archives(target):
        return _archives(target)[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".tmp-{spec.key}-", dir=target.parent))
    command = [
        # `--no-binary NAME`, not `:all:`: only this project must come as source; with `:all:` pip
        # also builds the build backend (setuptools, hatchling) from source to read the metadata.
        sys.executable, "-m", "pip", "download", "--no-binary", spec.name, "--no-deps",
        "--disable-pip-version-check", "--quiet", "--dest", str(scratch), f"{spec.name}=={spec.version}",
    ]  # fmt: skip
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        shutil.rmtree(scratch, ignore_errors=True)
        raise RepoError(
            f"downloading {spec.name}=={spec.version} took over {DOWNLOAD_TIMEOUT_S:.0f} s; "
            "is PyPI reachable?"
        ) from None
    if result.returncode != 0 or not _archives(scratch):
        shutil.rmtree(scratch, ignore_errors=True)
        detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise RepoError(
            f"cannot download the sdist of {spec.name}=={spec.version} from PyPI: {' | '.join(detail)}. "
            f"Check the name and version (`pip index versions {spec.name}`), that the project publishes "
            "a source distribution, and that PyPI is reachable."
        )
    _publish(scratch, target)
    return _archives(target)[0]


def _archives(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith((".tar.gz", ".tgz", ".zip", ".tar.bz2")))


def unpack(archive: Path, dest: Path) -> None:
    """Extract an sdist into dest without its single top-level directory. Unsafe members (absolute
    paths, `..`, links out of the tree) are refused by tarfile's "data" filter."""
    scratch = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as bundle:
                for member in bundle.namelist():
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise RepoError(f"{archive.name}: unsafe member {member!r}")
                bundle.extractall(scratch)
        else:
            with tarfile.open(archive) as bundle:
                bundle.extractall(scratch, filter="data")
        entries = list(scratch.iterdir())
        root = entries[0] if len(entries) == 1 and entries[0].is_dir() else scratch
        shutil.copytree(root, dest, symlinks=True)
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        raise RepoError(f"cannot unpack {archive}: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def init_repository(repo: Path, message: str) -> None:
    """One commit of everything in repo, ignored files included, with fixed identity and dates."""
    git(repo, "init", "--quiet", "--initial-branch=main")
    exclude = repo / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    # What test runs leave behind must not show up as changes.
    exclude.write_text("__pycache__/\n*.pyc\n.pytest_cache/\n")
    git(repo, "add", "--all", "--force", ".")
    git(repo, "commit", "--quiet", "--no-verify", "-m", message)


def prepare_repo(spec: RepoSpec, cache_dir: Path) -> Path:
    """The git repository of spec's sdist (one commit), built once into cache_dir/repos/<name>-<version>."""
    cache_dir = Path(cache_dir)
    final = cache_dir / "repos" / spec.key
    if (final / ".git").is_dir():
        return final
    with _entry_lock(cache_dir, f"repo-{spec.key}"):
        if (final / ".git").is_dir():
            return final
        archive = download_sdist(spec, cache_dir)
        final.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".tmp-{spec.key}-", dir=final.parent))
        try:
            unpack(archive, scratch / "repo")
            try:
                init_repository(scratch / "repo", f"{spec.name} {spec.version} from {archive.name}")
            except MutationError as exc:  # git failed: not installed, disk full
                raise RepoError(f"cannot make a git repository of {archive.name}: {exc}") from exc
            _publish(scratch / "repo", final)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return final


def spec_for(metadata: dict[str, Any]) -> RepoSpec:
    """The RepoSpec a task's metadata names: the embedded one, or one built from the metadata."""
    name, version = metadata.get("repo"), metadata.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        raise RepoError(
            f"a SWE task's metadata needs 'repo' and 'version' strings, got {name!r}, {version!r}"
        )
    known = embedded_suite().get(name)
    if known is not None and known.version == version:
        return known
    command = metadata.get("test_command")
    if not isinstance(command, list) or not all(isinstance(c, str) for c in command) or not command:
        raise RepoError(
            f"{name} {version} is not in the embedded suite: its task needs a 'test_command' list"
        )
    timeout = float(metadata.get("test_timeout_s", 60.0))
    return RepoSpec(name, version, tuple(command), timeout, tuple(metadata.get("source", ())))


# 2: the mutation is amended into the one commit (version 1 added a second commit that showed it).
# 3: a task's recorded mutation is applied as recorded (version 2 searched again with the seed, which
#    found another bug where the tests covered other lines).
TEMPLATE_LAYOUT = 3


def task_template(metadata: dict[str, Any], cache_dir: Path) -> Path:
    """A prepared repository whose one commit holds the task's mutation (cached; never modify it).

    metadata: {"repo", "version", "seed", "test_command"?, "mutation"?}. A task that records its
    mutation gets exactly that one (it must still apply and make a test fail, so a changed sdist is
    caught here); otherwise the seed picks one.
    """
    cache_dir = Path(cache_dir)
    spec = spec_for(metadata)
    seed = metadata.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise RepoError(f"a SWE task's metadata needs an integer 'seed', got {seed!r}")
    recorded = _recorded_mutation(metadata)
    final = cache_dir / "templates" / f"{spec.key}-seed{seed}-v{TEMPLATE_LAYOUT}"
    if not (final / ".git").is_dir():
        with _entry_lock(cache_dir, f"template-{spec.key}-seed{seed}"):
            if not (final / ".git").is_dir():
                _build_template(spec, seed, recorded, cache_dir, final)
    if recorded is not None:
        found = load_mutation(final)
        if found != recorded:  # built by the seed's search, for a task that did not record it
            raise RepoError(
                f"the mutation of {spec.key} seed {seed} in {final} is not the one the task records "
                f"({found.description!r} vs {recorded.description!r}); delete {final} and retry"
            )
    return final


def _recorded_mutation(metadata: dict[str, Any]) -> Mutation | None:
    expected = metadata.get("mutation")
    if not expected:
        return None
    try:
        return Mutation(**expected)
    except TypeError as exc:
        raise RepoError(f"a SWE task's 'mutation' needs the fields of a Mutation: {exc}") from exc


def _build_template(
    spec: RepoSpec, seed: int, recorded: Mutation | None, cache_dir: Path, final: Path
) -> None:
    base = prepare_repo(spec, cache_dir)
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".tmp-{spec.key}-seed{seed}-", dir=final.parent))
    try:
        repo = scratch / "repo"
        shutil.copytree(base, repo, symlinks=True)
        try:
            if recorded is not None:
                found = apply_recorded(repo, recorded, spec.test_command, spec.test_timeout_s)
            else:
                found = mutate(repo, seed, spec.test_command, spec.test_timeout_s, spec.source)
        except MutationError as exc:
            raise RepoError(f"{spec.key} seed {seed}: {exc}") from exc
        _mutation_file(final).write_text(found.to_json())
        _publish(repo, final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _mutation_file(template: Path) -> Path:
    # Beside the template, not inside it: a workspace copied from it must not hold the answer.
    return template.parent / f"{template.name}.mutation.json"


def load_mutation(template: Path) -> Mutation:
    """The mutation a template was built with."""
    return Mutation.from_json(_mutation_file(Path(template)).read_text())


__all__ = [
    "RepoError",
    "RepoSpec",
    "default_cache_dir",
    "download_sdist",
    "embedded_suite",
    "load_mutation",
    "prepare_repo",
    "spec_for",
    "task_template",
]

"""Repositories for the SWE tests: one written from a few files, and what a test can see of a
prepared one through git, as an agent in the workspace could."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sandboxes.swe.repos import init_repository


def write_repository(repo: Path, files: dict[str, str], message: str) -> Path:
    """`repo` holding `files` (relative path -> text) in one commit, as a prepared repository is."""
    for relative, text in files.items():
        (repo / relative).parent.mkdir(parents=True, exist_ok=True)
        (repo / relative).write_text(text)
    init_repository(repo, message)
    return repo


def commits_in_object_store(repo: Path) -> int:
    """Commit objects anywhere in the repository, reachable or not (reflog, dangling, packed)."""
    objects = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch-check=%(objecttype)"],
        cwd=repo, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    return objects.count("commit")


def changed_files(original: Path, changed: Path) -> list[str]:
    """Paths whose content differs between two checkouts (git metadata aside)."""
    result = subprocess.run(
        ["diff", "-rq", "-x", ".git", str(original), str(changed)], capture_output=True, text=True, timeout=60
    )
    prefix = f"Files {original}/"
    return sorted(line[len(prefix) :].split(" and ", 1)[0] for line in result.stdout.splitlines())

"""Our mutated PyPI repositories as SWE-bench instances:
`python -m collectors.swe --export-swebench OUT.jsonl [--tasks FILE]`.

Each task with a recorded mutation and a `swe_tests` verifier becomes one instance: `repo`
`agentworld/<name>`, mirrored as the bare repository OUT-repos/agentworld__<name> (one branch per
task, named by its id, at the mutated commit), `base_commit` that commit, `patch` the fix (the
mutation reverted, as `git diff` writes it), `test_patch` empty (the tests are the project's own),
FAIL_TO_PASS and PASS_TO_PASS as JSON strings (the public dataset's form), and `test_command`, which
the loader uses instead of its default (src layouts need `PYTHONPATH=src`). The loader reads them
back with `--swebench OUT.jsonl` (its repositories default to OUT-repos).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from collectors.tasks import TaskSpec
from sandboxes.swe.mutation import Mutation, MutationError, git, revert_patch
from sandboxes.swe.repos import RepoError, task_template
from sandboxes.swe.verify import SWE_TESTS

REPO_OWNER = "agentworld"


def fix_patch(template: Path, mutation: Mutation) -> str:
    """The unified git diff that reverts `mutation` in the repository at `template`."""
    edit = revert_patch(mutation)
    with tempfile.TemporaryDirectory(prefix="agentworld-swe-export-") as scratch:
        copy = Path(scratch) / "repo"
        shutil.copytree(template, copy, symlinks=True)
        path = copy / edit["path"]
        text = path.read_text(encoding="utf-8")
        if text.count(edit["old_str"]) != 1:
            raise RepoError(f"{template}: the mutated lines are not found once in {edit['path']}")
        path.write_text(text.replace(edit["old_str"], edit["new_str"]), encoding="utf-8")
        return git(copy, "diff", "--no-color", "--no-ext-diff")


def mirror(template: Path, repos_dir: Path, name: str, branch: str) -> tuple[str, str]:
    """(repo, base_commit): the template's commit pushed to branch `branch` of the bare mirror."""
    repo = f"{REPO_OWNER}/{name}"
    target = repos_dir / repo.replace("/", "__")
    if not (target / "HEAD").is_file():
        target.mkdir(parents=True, exist_ok=True)
        git(target, "init", "--quiet", "--bare")
    commit = git(template, "rev-parse", "HEAD").strip()
    git(target, "fetch", "--quiet", "--no-tags", str(template), f"+HEAD:refs/heads/{branch}")
    return repo, commit


def export_instance(spec: TaskSpec, repos_dir: Path, cache_dir: Path) -> dict[str, Any]:
    """The SWE-bench instance of one embedded-style task; RepoError when it has none."""
    metadata, verifier = spec.task.metadata, spec.task.verifier
    if verifier.get("kind") != SWE_TESTS or not metadata.get("mutation"):
        raise RepoError(f"task {spec.id} records no mutation and swe_tests verifier; it cannot be exported")
    template = task_template(metadata, cache_dir)
    mutation = Mutation(**metadata["mutation"])
    try:
        repo, commit = mirror(template, repos_dir, str(metadata["repo"]), spec.id)
        patch = fix_patch(template, mutation)
    except MutationError as exc:
        raise RepoError(f"task {spec.id}: {exc}") from exc
    return {
        "instance_id": spec.id,
        "repo": repo,
        "base_commit": commit,
        "patch": patch,
        "test_patch": "",
        "FAIL_TO_PASS": json.dumps(verifier["FAIL_TO_PASS"]),
        "PASS_TO_PASS": json.dumps(verifier["PASS_TO_PASS"]),
        "problem_statement": spec.task.instruction,
        "version": str(metadata.get("version", "")),
        "test_command": verifier["test_command"],
    }


def export(tasks: list[TaskSpec], out: Path, repos_dir: Path, cache_dir: Path) -> list[str]:
    """Write the instances of `tasks` to `out` (JSONL, replaced whole); the errors of those skipped."""
    lines: list[str] = []
    errors: list[str] = []
    for spec in tasks:
        try:
            lines.append(json.dumps(export_instance(spec, repos_dir, cache_dir), ensure_ascii=False))
        except RepoError as exc:
            errors.append(str(exc))
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_name(f".{out.name}.tmp")
    scratch.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    scratch.replace(out)
    return errors

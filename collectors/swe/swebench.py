"""SWE-bench instances as SWE tasks: `python -m collectors.swe --swebench FILE.jsonl`.

An instance (`instance_id`, `repo`, `base_commit`, `patch`, `test_patch`, `FAIL_TO_PASS`,
`PASS_TO_PASS`; the two test lists may be JSON-encoded strings, as in the public dataset) names a
repository found locally: `repo` itself when it is a directory, else `REPOS/owner__name` (or
`owner__name.git`, a bare mirror), REPOS being --swebench-repos. Its task starts from a checkout of
`base_commit` that holds the history up to that commit and nothing after it (so `git log --all`
does not show the fix). The verifier puts the test files back, applies `test_patch` and runs
FAIL_TO_PASS and PASS_TO_PASS (sandboxes/swe/verify.py). The scripted actions are the oracle: they
apply the gold `patch`. An instance that cannot be used (a missing field, repository or commit) is
reported by itself; the others still run. An optional `test_command` (a list) replaces the default
`python3 -m pytest` over the test files the ids name; `problem_statement` is the instruction.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from collectors.tasks import TaskSpec
from sandboxes.swe.mutation import MutationError, git
from sandboxes.swe.verify import SWE_TESTS, node_files, verifier_command
from schemas.records import Task

FIELDS = ("instance_id", "repo", "base_commit", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")
DEFAULT_TEST_COMMAND = ("python3", "-m", "pytest", "-q", "-p", "no:cacheprovider")
TIMEOUT_S = 600.0
# Where the oracle writes the gold patch before applying it: a file, not a command line, so a
# patch of any size fits.
GOLD_PATCH = ".agentworld-gold.patch"
# The user's own repository may belong to another user: git would refuse to read it otherwise.
TRUST = ("-c", "safe.directory=*")


class InstanceError(ValueError):
    """This instance cannot become a task; the message says why."""


def default_repos_dir(instances: Path) -> Path:
    """Where `--export-swebench OUT.jsonl` puts its mirrors and the loader looks by default."""
    return instances.parent / f"{instances.stem}-repos"


def _test_ids(instance: dict[str, Any], key: str) -> list[str]:
    value = instance[key]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InstanceError(f"{key} is a string but not a JSON list: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InstanceError(f"{key} must be a list of pytest node ids (or that list as a JSON string)")
    return value


def check_instance(instance: Any) -> dict[str, Any]:
    """The instance with its test lists decoded; InstanceError for a malformed one."""
    if not isinstance(instance, dict):
        raise InstanceError("an instance must be a JSON object")
    missing = [key for key in FIELDS if key not in instance]
    if missing:
        raise InstanceError(f"missing {', '.join(missing)}")
    for key in ("instance_id", "repo", "base_commit", "patch", "test_patch"):
        if not isinstance(instance[key], str):
            raise InstanceError(f"{key} must be a string")
    checked = {**instance, "FAIL_TO_PASS": _test_ids(instance, "FAIL_TO_PASS")}
    checked["PASS_TO_PASS"] = _test_ids(instance, "PASS_TO_PASS")
    if not checked["FAIL_TO_PASS"] and not checked["PASS_TO_PASS"]:
        raise InstanceError("FAIL_TO_PASS and PASS_TO_PASS are both empty: nothing to verify")
    command = instance.get("test_command")
    if command is not None and (
        not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command)
    ):
        raise InstanceError("test_command must be a non-empty list of strings")
    return checked


def repo_source(repo: str, repos_dir: Path | None) -> Path:
    """The local repository an instance's `repo` names."""
    if os.path.isdir(repo):
        return Path(repo).resolve()
    if repos_dir is None:
        raise InstanceError(f"repository {repo} is not a local directory and no --swebench-repos was given")
    name = repo.replace("/", "__")
    for candidate in (repos_dir / name, repos_dir / f"{name}.git"):
        if candidate.is_dir():
            return candidate.resolve()
    raise InstanceError(f"repository {repo} not found: no {repos_dir / name} (nor {name}.git)")


def checkout(source: Path, base_commit: str, cache_dir: Path) -> Path:
    """A cached repository at `base_commit` holding its history and nothing later; never modify it."""
    try:
        commit = git(source, *TRUST, "rev-parse", "--verify", "--quiet", f"{base_commit}^{{commit}}").strip()
    except MutationError:
        raise InstanceError(
            f"commit {base_commit} is not in {source} (fetch it into that repository)"
        ) from None
    key = hashlib.sha256(str(source).encode()).hexdigest()[:10]
    final = Path(cache_dir) / "swebench" / f"{source.name.removesuffix('.git')}-{key}-{commit}"
    if (final / ".git").is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
    try:
        repo = scratch / "repo"
        repo.mkdir()
        git(repo, "init", "--quiet")
        git(repo, *TRUST, "fetch", "--quiet", "--no-tags", str(source), commit)
        git(repo, "checkout", "--quiet", "--detach", commit)
        try:
            os.rename(repo, final)
        except OSError:  # another loader published it first
            if not (final / ".git").is_dir():
                raise
    except MutationError as exc:
        raise InstanceError(f"cannot check out {commit} of {source}: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return final


def gold_actions(patch: str) -> list[dict[str, Any]]:
    """The oracle's actions: write the gold patch and apply it with git."""
    if not patch.strip():
        return []
    apply = f"git apply --whitespace=nowarn {GOLD_PATCH} && rm {GOLD_PATCH}"
    return [
        {"kind": "edit", "arguments": {"command": "create", "path": GOLD_PATCH, "file_text": patch}},
        {"kind": "bash", "arguments": {"command": apply}},
    ]


def instance_task(instance: dict[str, Any], template: Path) -> TaskSpec:
    """The task of a checked instance whose repository is checked out at `template`."""
    f2p, p2p = instance["FAIL_TO_PASS"], instance["PASS_TO_PASS"]
    command = instance.get("test_command") or [*DEFAULT_TEST_COMMAND, *node_files(f2p + p2p)]
    verifier = {
        "kind": SWE_TESTS,
        "test_command": verifier_command(command),
        "timeout_s": TIMEOUT_S,
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS": p2p,
        "test_patch": instance["test_patch"],
    }
    instruction = instance.get("problem_statement") or (
        f"Fix the bug in {instance['repo']} that makes these tests fail: {', '.join(f2p)}."
    )
    metadata = {
        "template": str(template),
        "repo": instance["repo"],
        "swebench": {"instance_id": instance["instance_id"], "base_commit": instance["base_commit"]},
    }
    task = Task(id=instance["instance_id"], instruction=instruction, metadata=metadata, verifier=verifier)
    return TaskSpec(task=task, actions=gold_actions(instance["patch"]))


def load_swebench(path: Path, repos_dir: Path | None, cache_dir: Path) -> tuple[list[TaskSpec], list[str]]:
    """(tasks, errors): one task per usable instance of the JSONL file at `path`, one message per
    instance that is not usable, naming its line and id."""
    tasks: list[TaskSpec] = []
    errors: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        label = f"{path}:{number}"
        try:
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InstanceError(f"not JSON: {exc}") from None
            if isinstance(raw, dict) and isinstance(raw.get("instance_id"), str):
                label += f" ({raw['instance_id']})"
            instance = check_instance(raw)
            template = checkout(repo_source(instance["repo"], repos_dir), instance["base_commit"], cache_dir)
            tasks.append(instance_task(instance, template))
        except InstanceError as exc:
            errors.append(f"{label}: {exc}")
    return tasks, errors

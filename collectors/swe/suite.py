"""SWE tasks from the embedded suite: one task per (repository, seed), carrying its mutation and the
scripted fix (run the tests, revert the mutation with one str_replace, run the tests again)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from collectors.tasks import TaskSpec
from sandboxes.swe.mutation import Mutation, revert_patch
from sandboxes.swe.repos import RepoSpec, load_mutation, task_template


def instruction(spec: RepoSpec) -> str:
    return (
        f"The test suite of {spec.name} {spec.version} fails: its source code has a bug. "
        f"Find the bug and fix the source so that the tests pass (`{shlex.join(spec.test_command)}`); "
        "do not change the tests."
    )


def task_line(spec: RepoSpec, seed: int, mutation: Mutation) -> dict[str, Any]:
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
    }


def build_task(spec: RepoSpec, seed: int, cache_dir: Path) -> dict[str, Any]:
    """Prepare (or reuse) the mutated template of spec and seed; its task line."""
    template = task_template({"repo": spec.name, "version": spec.version, "seed": seed}, cache_dir)
    return task_line(spec, seed, load_mutation(template))


def templates_for(tasks: Iterable[TaskSpec], cache_dir: Path) -> list[Path]:
    """The prepared repository of each task that names one (tasks with a `template` need none)."""
    return [
        task_template(spec.task.metadata, cache_dir)
        for spec in tasks
        if not spec.task.metadata.get("template")
    ]

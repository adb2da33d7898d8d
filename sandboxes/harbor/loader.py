"""Harbor task folders read by harbor's own task model, in a subprocess under `.venv-harbor`.

harbor (pinned 0.25.0) needs Python >= 3.12 and the project runs on 3.11, so `load_task.py` runs
under the second venv that `make setup` makes and prints each task as JSON; this module turns that
into `HarborTask`s. No parser of ours reads task.toml.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandboxes.base import SandboxError

ROOT = Path(__file__).resolve().parents[2]
HARBOR_PYTHON = ROOT / ".venv-harbor" / "bin" / "python"
LOADER = Path(__file__).with_name("load_task.py")
LOAD_TIMEOUT_S = 120.0


class HarborError(SandboxError):
    """A Harbor task cannot be used: not loadable, an unmappable base image, a failed build."""


@dataclass
class HarborTask:
    """One task folder as harbor's `Task` read it."""

    name: str
    path: str
    instruction: str
    environment: dict[str, Any]  # docker_image, cpus, memory_mb, storage_mb, build_timeout_sec, network, ...
    agent: dict[str, Any]  # timeout_sec, user
    verifier: dict[str, Any]  # timeout_sec, user
    paths: dict[str, Any]  # task_dir, environment_dir, dockerfile, tests_dir, test, solution_dir, solve
    multi_step: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> HarborTask:
        keys = ("name", "path", "instruction", "environment", "agent", "verifier", "paths", "multi_step")
        return cls(**{k: obj[k] for k in keys}, raw=obj)


def task_folders(root: str | os.PathLike[str]) -> list[Path]:
    """`root` itself when it is a task folder (holds task.toml), else its sub-folders that are."""
    path = Path(root)
    if not path.is_dir():
        raise HarborError(f"--harbor-tasks {root}: not a directory")
    if (path / "task.toml").is_file():
        return [path]
    folders = sorted(p for p in path.iterdir() if (p / "task.toml").is_file())
    if not folders:
        raise HarborError(f"--harbor-tasks {root}: no task folder (a folder with task.toml) in it")
    return folders


def load_tasks(
    folders: list[Path], python: str | os.PathLike[str] = HARBOR_PYTHON
) -> tuple[list[HarborTask], dict[str, str]]:
    """(tasks, {folder: why harbor refused it}). HarborError when harbor cannot run at all."""
    if not Path(python).exists():
        raise HarborError(
            f"Harbor task folders need harbor's Python 3.12 venv at {python}: run `make setup`"
            " (or `bash sandboxes/harbor/make_venv.sh`)"
        )
    argv = [str(python), str(LOADER), *map(str, folders)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise HarborError(f"harbor's task loader did not finish in {LOAD_TIMEOUT_S:g} s") from exc
    if done.returncode != 0:
        raise HarborError(f"harbor's task loader failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    tasks: list[HarborTask] = []
    refused: dict[str, str] = {}
    for line in done.stdout.splitlines():
        obj = json.loads(line)
        if "error" in obj:
            refused[obj["path"]] = f"harbor cannot load it: {obj['error']}"
        elif obj["multi_step"]:
            refused[obj["path"]] = "multi-step tasks ([[steps]]) are not supported"
        else:
            tasks.append(HarborTask.from_json(obj))
    return tasks, refused

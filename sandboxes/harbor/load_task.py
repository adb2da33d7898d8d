"""Print Harbor task folders as JSON, read with harbor's own task model (`harbor.models.task`).

Run under the Python 3.12 venv that holds harbor (`.venv-harbor/bin/python load_task.py DIR...`),
never imported by our 3.11 code: it imports only harbor and the standard library. One JSON object
per folder on stdout, in order: the task, or {"path": ..., "error": ...} when harbor refuses it.
"""

import json
import sys

from harbor.models.task.config import NetworkMode
from harbor.models.task.task import Task


def describe(folder: str) -> dict:
    task = Task(folder)
    config, paths = task.config, task.paths
    env = config.environment
    # Harbor's default network mode is public; ours is none, so only a mode the task states asks.
    asked = "network_mode" in env.model_fields_set and env.network_mode != NetworkMode.NO_NETWORK
    solve = paths.discovered_solve_path_for(env.os)
    test = paths.discovered_test_path_for(env.os)
    return {
        "path": str(paths.task_dir),
        "name": task.name,
        "instruction": task.instruction,
        "multi_step": task.has_steps,
        "environment": {
            "docker_image": env.docker_image,
            "os": env.os.value,
            "cpus": env.cpus,
            "memory_mb": env.memory_mb,
            "storage_mb": env.storage_mb,
            "build_timeout_sec": env.build_timeout_sec,
            "network": env.network_mode.value if asked or env.allow_internet else "no-network",
            "workdir": env.workdir,
        },
        "agent": {"timeout_sec": config.agent.timeout_sec, "user": config.agent.user},
        "verifier": {"timeout_sec": config.verifier.timeout_sec, "user": config.verifier.user},
        "paths": {
            "task_dir": str(paths.task_dir),
            "instruction": str(paths.instruction_path),
            "environment_dir": str(paths.environment_dir),
            "dockerfile": str(paths.environment_dir / "Dockerfile"),
            "tests_dir": str(paths.tests_dir),
            "test": str(test) if test else None,
            "solution_dir": str(paths.solution_dir),
            "solve": str(solve) if solve else None,
        },
    }


def main(folders: list[str]) -> int:
    for folder in folders:
        try:
            record = describe(folder)
        except Exception as exc:  # harbor's own validation message is what the user needs
            record = {"path": folder, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

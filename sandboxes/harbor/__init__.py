"""Harbor task folders (Terminal-Bench 2's format): loaded by harbor's own model, built, verified."""

from sandboxes.harbor.images import MAP_FLAG, BuiltImage, build_image
from sandboxes.harbor.loader import HarborError, HarborTask, load_tasks, task_folders
from sandboxes.harbor.sandbox import HarborSandbox
from sandboxes.harbor.verifier import HARBOR, run_test_sh

__all__ = [
    "HARBOR",
    "MAP_FLAG",
    "BuiltImage",
    "HarborError",
    "HarborSandbox",
    "HarborTask",
    "build_image",
    "load_tasks",
    "run_test_sh",
    "task_folders",
]

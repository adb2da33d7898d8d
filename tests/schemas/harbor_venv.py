"""Harbor's own code on ATIF files, run under `.venv-harbor` (harbor 0.25.0 needs Python 3.12, so it
lives in the second venv `make setup` makes; our code never imports it). The venv is found as the
Harbor task loader finds it (`sandboxes.harbor.loader.HARBOR_PYTHON`); without it the tests fail
saying so."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from sandboxes.harbor.loader import HARBOR_PYTHON

# Each file through harbor's validator (its pydantic models, and the check that every image a step
# names exists beside the file), then loaded by the model for what the tests look at.
_VALIDATE = """
import json, sys
from harbor.models.trajectories import Trajectory
from harbor.utils.trajectory_validator import TrajectoryValidator

report = {}
for path in sys.argv[1:]:
    validator = TrajectoryValidator()
    entry = {"valid": validator.validate(path), "errors": validator.get_errors()}
    if entry["valid"]:
        with open(path) as handle:
            model = Trajectory.model_validate_json(handle.read())
        entry.update(
            version=model.schema_version,
            steps=len(model.steps),
            agent=model.agent.name,
            multimodal=model.has_multimodal_content(),
        )
    report[path] = entry
print(json.dumps(report))
"""

# Harbor's trace exporter (harbor.utils.traces_utils), which turns a trial's trajectory.json into chat
# conversations for training: one per agent step.
_CONVERSATIONS = """
import json, sys
from pathlib import Path
from harbor.utils.traces_utils import extract_conversations_from_trajectory

run = {"agent_name": "", "model_name": "", "model_provider": "", "start_time": "", "run_id": "test"}
found = extract_conversations_from_trajectory(Path(sys.argv[1]), run)
print(json.dumps([c["conversations"] for c in found]))
"""


def run_harbor(script: str, *args: str, timeout: float = 600) -> str:
    """`script` under harbor's Python with `args`; its stdout. Fails loudly when the venv is missing.
    Harbor imports its whole package tree (seconds on a quiet machine, over 120 s under a loaded
    test run), hence the long timeout."""
    assert HARBOR_PYTHON.exists(), f"harbor's venv is missing at {HARBOR_PYTHON}: run `make setup`"
    done = subprocess.run(
        [str(HARBOR_PYTHON), "-c", script, *args], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def harbor_validate(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """path -> {valid, errors, and for a valid file: version, steps, agent, multimodal}."""
    return json.loads(run_harbor(_VALIDATE, *map(str, paths)))


def harbor_conversations(path: Path) -> list[list[dict[str, str]]]:
    """The conversations Harbor's trace exporter makes of one trajectory.json."""
    return json.loads(run_harbor(_CONVERSATIONS, str(path)))

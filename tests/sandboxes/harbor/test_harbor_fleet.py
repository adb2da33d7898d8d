"""A Harbor task through the real runner in HarborSandbox: the oracle scores 1, doing nothing 0,
half the job 0.5 (reward.json); the agent timeout ends the episode. Real docker, real test.sh."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.terminal.harbor import harbor_spec
from sandboxes.checks import check_sandbox
from sandboxes.harbor import build_image, load_tasks, task_folders
from sandboxes.terminal import command_action
from tests.sandboxes.harbor.folders import PARTIAL_SOLVE, PARTIAL_TEST, write_task
from tests.sandboxes.harbor.plays import harbor_sandboxes, play_specs, run_plays

pytestmark = [pytest.mark.docker, pytest.mark.tmux]


def test_oracle_nothing_and_half_the_job(tmp_path: Path, terminal_image: str) -> None:
    write_task(tmp_path / "tasks", "halves", test_sh=PARTIAL_TEST, solve_sh=PARTIAL_SOLVE, agent_timeout=3)
    [task], _ = load_tasks(task_folders(tmp_path / "tasks"))
    image = build_image(task, map_base_images=True)
    again = build_image(task, map_base_images=True)
    assert again.cached and again.tag == image.tag  # same environment folder: no rebuild
    plays = {
        "oracle": harbor_spec(task, image, oracle=True, with_solution=True).actions,
        "nothing": [{"command": "ls -la"}],
        "half": [{"command": "echo alpha > /app/a.txt && echo gamma > /app/b.txt"}],
        "timeout": [{"command": "sleep 20"}, {"command": "echo alpha > /app/a.txt"}],
    }
    specs = play_specs(task, image, plays, oracle="oracle")
    summary, found = run_plays(task, image, specs, tmp_path / "out", max_steps=4)
    assert summary.exit_code == 0
    rewards = {label: t.outcome.reward for label, t in found.items()}
    assert rewards == {"oracle": 1.0, "nothing": 0.0, "half": 0.5, "timeout": 0.0}
    half = found["half"].outcome.verification
    assert half is not None and half.verifier == "harbor" and not half.error
    assert half.details["rewards"] == {"reward": 0.5, "a": 1, "b": 0}
    assert half.details["reward_file"] == "reward.json" and "a=1 b=0" in half.output
    # The agent timeout (3 s) cut the sleep short and ended the episode before its second action.
    timed = found["timeout"]
    assert len(timed.steps) == 1 and timed.steps[0].info["agent_timeout_s"] == 3
    assert timed.steps[0].observation.data["timed_out"] and timed.steps[0].latency_s < 10
    assert found["oracle"].environment.config["memory"] == "384m"
    assert found["oracle"].environment.image == image.tag


def test_harbor_sandbox_keeps_the_sandbox_contract(tmp_path: Path, terminal_image: str) -> None:
    write_task(tmp_path / "tasks", "checked")
    [task], _ = load_tasks(task_folders(tmp_path / "tasks"))
    image = build_image(task, map_base_images=True)
    spec = harbor_spec(task, image, oracle=True, with_solution=True)
    check_sandbox(harbor_sandboxes(task, image)(), spec.task, [command_action("ls /solution && whoami")])

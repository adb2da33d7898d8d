"""`python -m training.fidelity` on the os domain: a calculator trajectory recorded here with the real
local desktop sandbox, replayed on a fresh desktop for the noise floor, scored with the tree-aware
metrics, with a world model served over real HTTP that predicts nothing changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxes.desktop import DesktopConfig, DesktopSandbox, parse_action
from sandboxes.domains import domain_spec
from schemas.records import Task
from tests.training.test_fidelity_domains import check_tree_model, record, replay_ceiling, run_fidelity

pytestmark = pytest.mark.bwrap


def test_desktop_noise_floor_from_fresh_desktops_and_tree_metrics(tmp_path: Path) -> None:
    task = Task(id="calc-add", instruction="Compute 7 + 6.", metadata={"apps": ["calculator"]})
    plan = [
        parse_action("computer", {"action": "type", "text": "7+6"}),
        parse_action("pyautogui", {"code": "pyautogui.press('enter')"}),
        parse_action("computer", {"action": "click", "x": 1270, "y": 790}),  # the empty desktop
    ]
    with DesktopSandbox(DesktopConfig(screenshot=False)) as sandbox:
        trajectory = record(sandbox, task, plan)
    assert 'value="13"' in trajectory.steps[1].observation.text
    last = trajectory.steps[-1].observation.text
    assert last.startswith("Error: nothing at (1270, 790)")
    # The prompt wording names the header lines the sandbox really writes.
    for line in last.split("\n")[:2]:
        assert f"`{line.split(':', 1)[0]}: " in domain_spec("os").prompt.environment
    report = run_fidelity(trajectory, tmp_path, replays=1)
    ceiling = replay_ceiling(report, "os")
    # A fresh desktop shows the same calculator, the same result and the same error.
    assert ceiling["node_f1"] == 1.0 and ceiling["focused_match"] == 1.0 and ceiling["error_match"] == 1.0
    assert ceiling["position_within_tolerance"] == 1.0
    # "Nothing changes" misses the result (13) and the error of the last turn.
    check_tree_model(
        report, tmp_path, "os", ("node_f1", "node_state_f1", "position_within_tolerance"), "desktop"
    )

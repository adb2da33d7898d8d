"""The os domain's `desktop_state` verifier through the real collector on a real local desktop
(Xvfb, openbox, AT-SPI, gnome-calculator, mousepad, xterm in bubblewrap): the embedded tasks'
scripted actions (the oracle) score 1; a wrong end state scores 0, a half-done one 0.5."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import collectors.desktop
from collectors.desktop.__main__ import main
from sandboxes.base import VerifierError
from sandboxes.desktop.tree_text import parse_tree
from sandboxes.desktop.verify import evaluate, parse_checks
from schemas import read_trajectories
from schemas.records import Trajectory

TASKS = Path(collectors.desktop.__file__).parent / "tasks.jsonl"


def _embedded() -> dict[str, dict]:
    return {json.loads(line)["id"]: json.loads(line) for line in TASKS.read_text().splitlines()}


def _variant(task: dict, new_id: str, actions: list[dict] | None = None, **changes: object) -> dict:
    return {**task, "id": new_id, **({"actions": actions} if actions is not None else {}), **changes}


def _typed(text: str) -> dict:
    return {"kind": "computer", "arguments": {"action": "type", "text": text}}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Trajectory]:
    tasks = _embedded()
    enter = {"kind": "computer", "arguments": {"action": "press", "key": "enter"}}
    save = tasks["editor-save"]["actions"]
    chosen = [
        tasks["calc-add"],
        tasks["terminal-write"],
        tasks["apps-close-calculator"],
        _variant(tasks["calc-add"], "wrong-sum", [_typed("7+5"), enter]),
        _variant(tasks["terminal-write"], "wrong-file", [_typed("echo helo > hello.txt\n")]),
        _variant(tasks["editor-save"], "wrong-text", [_typed("Meeting at 11"), *save[1:]]),
        _variant(tasks["calc-add"], "bad-verifier", verifier={"kind": "desktop_state", "checks": []}),
    ]
    root = tmp_path_factory.mktemp("desktop_verify")
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in chosen))
    out = root / "out"
    argv = ["--policy", "scripted", "--tasks", str(root / "tasks.jsonl"), "--no-screenshots"]
    assert main([*argv, "--no-progress", "--out", str(out)]) == 0
    return {t.task.id: t for t in read_trajectories(str(out), validate=True)}


@pytest.mark.bwrap
def test_the_oracle_scores_one(recorded: dict[str, Trajectory]) -> None:
    for task_id in ("calc-add", "terminal-write", "apps-close-calculator"):
        trajectory = recorded[task_id]
        check = trajectory.outcome.verification
        assert trajectory.outcome.reward == 1.0, check
        assert check.verifier == "desktop_state" and check.error == "" and check.output.startswith("PASS")
        assert check.details["passed"] == check.details["total"] == len(trajectory.task.verifier["checks"])
    display = recorded["calc-add"].outcome.verification.details["checks"][0]
    assert display["passed"] and "value='13'" in display["seen"]


@pytest.mark.bwrap
def test_a_wrong_end_state_scores_zero_and_a_half_done_one_half(recorded: dict[str, Trajectory]) -> None:
    wrong = recorded["wrong-sum"].outcome
    assert wrong.reward == 0.0 and "value='12'" in wrong.verification.output  # what it saw instead
    assert recorded["wrong-file"].outcome.reward == 0.0
    assert "'helo\\n'" in recorded["wrong-file"].outcome.verification.output
    half = recorded["wrong-text"].outcome  # saved as notes.txt, but not the text asked for
    assert half.reward == 0.5
    assert [c["passed"] for c in half.verification.details["checks"]] == [True, False]


@pytest.mark.bwrap
def test_a_verifier_that_cannot_run_records_an_error_not_a_zero(recorded: dict[str, Trajectory]) -> None:
    outcome = recorded["bad-verifier"].outcome
    assert outcome.status == "completed" and outcome.reward is None
    assert (
        "VerifierError" in outcome.verification.error
        and "non-empty list of 'checks'" in outcome.verification.error
    )


TREE = """Focused: gnome-calculator — Calculator
[0] frame "Calculator" states=active @(462,169 355x486)
  [22] text "GtkSourceView" value="13" states=focused,editable @(462,335 343x32)
[67] frame "*Untitled 1 - Mousepad" @(638,0 642x505)
  [77] text "" states=editable @(640,48 638x449)"""


def test_node_checks_are_scoped_to_their_window() -> None:
    tree = parse_tree(TREE)
    checks = [
        {"node": {"window": "^Calculator$", "role": "text", "states": ["editable"], "value": "13"}},
        {"node": {"window": "Mousepad", "role": "text", "value": "13"}},
        {"node": {"window": "Mousepad", "role": "text", "value": ""}},
        {"no_node": {"role": "alert"}},
        {"file": "gone.txt", "exists": False},
    ]
    result = evaluate(
        parse_checks({"checks": checks}), tree, {"gone.txt": {"exists": False, "text": "", "size": 0}}
    )
    assert [c["passed"] for c in result.details["checks"]] == [True, False, True, True, True]
    assert result.reward == 0.8 and "seen instead: text '' value=''" in result.output


@pytest.mark.parametrize(
    "checks",
    [[], [{"node": {"colour": "red"}}], [{"file": "a", "size": 3}], [{"node": {"name_regex": "("}}], ["x"]],
)
def test_malformed_checks_are_refused(checks: list) -> None:
    with pytest.raises(VerifierError):
        parse_checks({"kind": "desktop_state", "checks": checks})

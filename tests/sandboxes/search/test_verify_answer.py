"""The search domain's "answer" verifier through the real collector on the real tantivy index: the
embedded tasks' scripted answers (the oracle) score 1, a wrong or missing answer scores 0."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from collectors.search.__main__ import main
from collectors.tasks import embedded_tasks
from sandboxes.base import InvalidActionError, VerifierError
from sandboxes.search import ACTION_SPACE, SearchSandbox, parse_action
from sandboxes.search.verify import normalise, verify_answer
from schemas import read_trajectories
from schemas.records import Action, Observation, Step, Task, Trajectory

TASKS = Path(__file__).resolve().parents[3] / "collectors" / "search" / "tasks.jsonl"


def _collect(index_dir: Path, out: Path, *extra: str) -> list[Trajectory]:
    argv = ["--index", str(index_dir), "--policy", "scripted", "--no-progress", "--out", str(out), *extra]
    assert main(argv) == 0
    return list(read_trajectories(str(out), validate=True))


def test_the_oracle_answers_every_verified_task(index_dir: Path, tmp_path: Path) -> None:
    specs = embedded_tasks("search")
    found = {t.task.id: t for t in _collect(index_dir, tmp_path / "oracle", "--episodes", str(len(specs)))}
    assert set(found) == {spec.id for spec in specs}
    verified = [t for t in found.values() if t.task.verifier["kind"] == "answer"]
    unverified = [t for t in found.values() if t.task.verifier["kind"] == "none"]
    assert len(verified) >= 30 and all(t.task.verifier.get("reason") for t in unverified)
    failures = {t.task.id: t.outcome.verification for t in verified if t.outcome.reward != 1.0}
    assert not failures
    for trajectory in verified:
        last = trajectory.steps[-1]
        assert trajectory.outcome.status == "completed" and last.action.kind == "answer"
        assert last.observation.text == "Answer recorded." and last.done
        check = trajectory.outcome.verification
        assert check.verifier == "answer" and check.error == "" and "matches" in check.output
        assert check.details["answer"] == last.action.arguments["text"] and check.elapsed_s < 0.5
    assert all(t.outcome.reward is None and t.outcome.verification is None for t in unverified)


def test_a_wrong_or_missing_answer_scores_zero(index_dir: Path, tmp_path: Path) -> None:
    lines = {json.loads(line)["id"]: json.loads(line) for line in TASKS.read_text().splitlines()}
    wrong, silent = lines["man-signal-list"], lines["man-sort-numeric"]
    text = "SIGTERM is 9 and SIGKILL is 15; both can be caught"
    wrong["actions"][-1] = {"kind": "answer", "arguments": {"text": text}}
    silent["actions"] = silent["actions"][:-1]  # searches, then stops without answering
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(f"{json.dumps(wrong)}\n{json.dumps(silent)}\n")
    found = {t.task.id: t for t in _collect(index_dir, tmp_path / "wrong", "--tasks", str(tasks))}
    assert found["man-signal-list"].outcome.reward == 0.0
    assert found["man-signal-list"].outcome.verification.details["answer"] == text
    assert "matches no accepted answer" in found["man-signal-list"].outcome.verification.output
    assert found["man-sort-numeric"].outcome.reward == 0.0
    assert found["man-sort-numeric"].outcome.verification.output == "no answer was given"


def test_answer_action_and_matching_rules(sandbox: SearchSandbox) -> None:
    assert '{"action": "answer", "text":' in ACTION_SPACE
    action = parse_action("answer", {"text": "ls -t"})
    assert action.text == "answer(text='ls -t')"
    for bad in ({}, {"text": "  "}, {"text": "x", "why": "y"}):
        with pytest.raises(InvalidActionError):
            parse_action("answer", bad)
    result = sandbox.step(action)
    assert result.done and result.observation.text == "Answer recorded."
    assert normalise("  Path.rglob()  ") == "path rglob" and normalise("ＬＳ  -T") == "ls t"
    verifier = {"kind": "answer", "accepted": ["ls -t"]}
    steps = [_step(parse_action("answer", {"text": "ls -l"})), _step(action)]
    assert verify_answer(verifier, steps).reward == 1.0  # the last answer counts
    assert verify_answer(verifier, steps[::-1]).reward == 0.0
    assert verify_answer(verifier, [_step(parse_action("answer", {"text": "lst"}))]).reward == 0.0
    with pytest.raises(VerifierError, match="needs 'accepted'"):
        sandbox.verify(Task(id="t", verifier={"kind": "answer"}), steps)
    with pytest.raises(VerifierError, match="no verifier of kind 'command'"):
        sandbox.verify(Task(id="t", verifier={"kind": "command"}), steps)


def _step(action: Action) -> Step:
    observation = Observation(format="search_results", text="")
    return Step(index=0, action=action, observation=observation, started_at=datetime.now(UTC), latency_s=0.0)


def test_the_answer_check_is_recorded_as_one_whole_verifier_turn(index_dir: Path, tmp_path: Path) -> None:
    from schemas.verification_turns import reward_line, verifier_action

    spec = next(s for s in embedded_tasks("search") if s.task.verifier["kind"] == "answer")
    row = {"id": spec.id, "instruction": spec.task.instruction, "verifier": spec.task.verifier}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({**row, "metadata": spec.task.metadata, "actions": spec.actions}) + "\n")
    (trajectory,) = _collect(index_dir, tmp_path / "one", "--tasks", str(tasks), "--episodes", "1")
    verification = trajectory.outcome.verification
    (turn,) = verification.turns  # the check, outside the steps
    assert turn.index == len(trajectory.steps) and turn.info == {"verification": True}
    assert turn.action == verifier_action(trajectory.task.verifier)
    assert turn.action.kind == "verify" and turn.action.text.startswith('verify {"accepted": [')
    assert turn.observation.format == "verification"
    assert turn.observation.text == f"{verification.output}\nreward: 1"
    assert reward_line(turn.observation.text) == trajectory.outcome.reward == 1.0

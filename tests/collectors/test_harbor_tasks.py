"""`python -m collectors.terminal --harbor-tasks DIR` end to end on task folders the test writes:
oracle-validated, run and rewarded; a broken test.sh and an unmappable base image each give a clear
error while the run goes on with the other tasks; a test.sh that rewards doing nothing is flagged.
Real docker, harbor's own task model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.terminal.__main__ import main
from collectors.terminal.harbor import FLAG_WARNING
from schemas import read_trajectories
from tests.sandboxes.harbor.folders import write_task

pytestmark = [pytest.mark.docker, pytest.mark.tmux]

EMBEDDED = Path(__file__).resolve().parents[2] / "collectors" / "terminal" / "harbor_tasks"
BROKEN_EXIT = "#!/bin/bash\necho 'cannot find the checker'\nexit 3\n"
BROKEN_GARBAGE = "#!/bin/bash\nmkdir -p /logs/verifier\necho 'all good!' > /logs/verifier/reward.txt\n"
# Checks nothing: the oracle gets 1, and so does doing nothing.
LENIENT = "#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n"


def test_harbor_folders_validated_run_and_rewarded(
    tmp_path: Path, terminal_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "good")
    write_task(tasks, "exits-without-reward", test_sh=BROKEN_EXIT)
    write_task(tasks, "garbage-reward", test_sh=BROKEN_GARBAGE)
    write_task(tasks, "lenient", test_sh=LENIENT)
    write_task(tasks, "private-base", base="registry.example.com/acme/private:1")
    out = tmp_path / "out"
    argv = ["--no-progress", "--harbor-tasks", str(tasks), "--map-base-images", "--max-steps", "2"]
    code = main([*argv, "--policy", "explorer", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 1, printed  # a refused task and two failed oracles: not a clean run

    found = {t.task.id: t for t in read_trajectories(str(out), validate=True)}
    assert set(found) == {
        *("good#oracle", "good#nothing", "good", "exits-without-reward#oracle", "garbage-reward#oracle"),
        *("lenient#oracle", "lenient#nothing", "lenient"),
    }
    oracle = found["good#oracle"]
    assert oracle.outcome.status == "completed" and oracle.outcome.reward == 1.0
    assert oracle.outcome.verification.verifier == "harbor" and "ok" in oracle.outcome.verification.output
    assert [s.action.arguments["command"] for s in oracle.steps] == ["bash /solution/solve.sh"]
    # The explorer does not write /app/done.txt: the same test.sh scores it 0.
    policy = found["good"]
    assert policy.policy.name == "explorer" and policy.outcome.reward == 0.0
    assert "done.txt is not yes" in policy.outcome.verification.output
    assert policy.environment.config["network"] is False

    exits = found["exits-without-reward#oracle"].outcome
    assert exits.reward is None and exits.verification.details["exit_code"] == 3
    assert "test.sh exited 3 without writing /logs/verifier/reward.txt" in exits.verification.error
    assert "cannot find the checker" in exits.verification.output
    garbage = found["garbage-reward#oracle"].outcome
    assert garbage.reward is None and "reward.txt is not a number: 'all good!" in garbage.verification.error

    summary = json.loads((out / "harbor_summary.json").read_text())
    reports = {r["name"]: r for r in summary["tasks"]}
    assert reports["good"]["oracle_reward"] == 1.0 and reports["good"]["rewards"] == [0.0]
    assert reports["good"]["nothing_reward"] == 0.0 and reports["good"]["warnings"] == []
    # The do-nothing policy's one no-op command got full reward, as the oracle did: flagged, still run.
    assert found["lenient#nothing"].outcome.reward == 1.0
    assert [s.action.arguments["command"] for s in found["lenient#nothing"].steps] == ["true"]
    assert reports["lenient"]["nothing_reward"] == 1.0 and reports["lenient"]["rewards"] == [1.0]
    assert reports["lenient"]["warnings"] == [FLAG_WARNING] and summary["flagged"] == ["lenient"]
    assert f"    WARNING: {FLAG_WARNING}" in printed
    assert "WARNING: 1 flagged (do-nothing gets full reward): lenient" in printed
    assert "without writing" in reports["exits-without-reward"]["oracle_error"]
    assert reports["garbage-reward"]["oracle_reward"] is None
    [(path, why)] = summary["refused"].items()
    assert path.endswith("private-base") and "registry.example.com/acme/private:1" in why
    assert "good: oracle passed; do-nothing reward 0.0; policy rewards [0.0]" in printed
    assert "exits-without-reward: oracle FAILED (test.sh exited 3" in printed


def test_unmapped_base_image_is_refused_naming_the_flag(
    tmp_path: Path, terminal_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_task(tmp_path / "tasks", "needs-mapping")
    code = main(["--no-progress", "--harbor-tasks", str(folder), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 1
    assert "base image ubuntu:24.04 is not present locally" in captured.out
    assert "pass --map-base-images" in captured.out
    assert not list((tmp_path / "out").rglob("*.parquet"))


def test_embedded_harbor_tasks_pass_their_oracles(
    tmp_path: Path, terminal_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--no-progress", "--harbor-tasks", str(EMBEDDED), "--map-base-images", "--episodes", "0"]
    code = main([*argv, "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 0, printed
    found = {t.task.id: t.outcome.reward for t in read_trajectories(str(tmp_path / "out"))}
    names = ("fix-config", "run-script", "word-count")
    assert sorted(found) == sorted(f"{n}{suffix}" for n in names for suffix in ("#oracle", "#nothing"))
    assert all(found[f"{n}#oracle"] == 1.0 for n in names), printed
    # Their test.sh tells a solution from doing nothing: none is flagged.
    assert all(found[f"{n}#nothing"] == 0.0 for n in names), printed
    assert "WARNING" not in printed

"""Terminal task verifiers on real bwrap and docker sandboxes, through the collector's CLI.

The embedded tasks' own oracle (their scripted actions) scores 1; a wrong or partial end state
scores 0 or the share of checks that pass; an agent that leaves vim open cannot sway the verdict;
a verifier that cannot run leaves the reward unknown (None), not 0, and the run goes on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.tasks import embedded_tasks
from tests.collectors.conftest import run_collector, trajectories, write_tasks

SUITE = {spec.id: spec for spec in embedded_tasks("terminal")}


def embedded(task_id: str, actions: list[dict] | None = None) -> dict:
    """The embedded task as JSON, with other actions (a wrong agent) when given."""
    spec = SUITE[task_id]
    task = spec.task
    row = {"id": task.id, "setup": task.setup, "verifier": task.verifier, "metadata": task.metadata}
    row["actions"] = spec.actions if actions is None else actions
    return row


def collect(tmp_path: Path, backend: str, tasks: list[dict]) -> tuple[dict[str, object], str]:
    """The trajectories by task id, and what the collector printed."""
    out = tmp_path / f"data-{backend}"
    path = write_tasks(tmp_path / f"tasks-{backend}.jsonl", tasks)
    done = run_collector(
        "--tasks", str(path), "--policy", "scripted", "--backend", backend, "--out", str(out)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {t.task.id: t for t in trajectories(out)}, done.stdout + done.stderr


def test_every_checkable_task_says_how_and_the_others_say_why_not() -> None:
    kinds = {spec.task.verifier.get("kind") for spec in SUITE.values()}
    assert kinds == {"command", "none"}
    assert all(
        spec.task.verifier.get("reason") for spec in SUITE.values() if spec.task.verifier["kind"] == "none"
    )
    assert sum(spec.task.verifier["kind"] == "command" for spec in SUITE.values()) >= 25


@pytest.mark.bwrap
def test_oracle_scores_1_and_wrong_end_states_score_0_or_partial(tmp_path: Path, bwrap: None) -> None:
    tasks = [
        embedded("files-mkdir-tree"),
        {**embedded("files-mkdir-tree", [{"command": "mkdir -p tool/src"}]), "id": "partial"},
        {**embedded("files-chmod-script", [{"command": "ls -l scripts"}]), "id": "untouched"},
        # The right file, then vim left open over it: the checks run beside the pane, not in it.
        {
            **embedded(
                "git-restore",
                [{"command": "cd repo && git restore stock.py"}, {"keystrokes": ["vi stock.py\n"]}],
            ),
            "id": "vim-left-open",
        },
        {"id": "unknown-kind", "verifier": {"kind": "telepathy"}, "actions": [{"command": "true"}]},
        {
            "id": "no-verifier",
            "verifier": {"kind": "none", "reason": "nothing to check"},
            "actions": [{"command": "true"}],
        },
    ]
    got, printed = collect(tmp_path, "bwrap", tasks)
    oracle = got["files-mkdir-tree"].outcome
    assert oracle.reward == 1.0 and oracle.verification.verifier == "command"
    assert oracle.verification.details["passed"] == 3 and oracle.verification.elapsed_s > 0
    partial = got["partial"].outcome
    assert partial.reward == pytest.approx(1 / 3)
    assert [c["passed"] for c in partial.verification.details["checks"]] == [True, False, False]
    assert got["untouched"].outcome.reward == 0.0
    assert "[exit 1]" in got["untouched"].outcome.verification.output
    assert got["vim-left-open"].outcome.reward == 1.0
    unknown = got["unknown-kind"].outcome
    assert unknown.status == "completed" and unknown.reward is None
    assert "no verifier of kind 'telepathy'" in unknown.verification.error
    assert got["no-verifier"].outcome.reward is None and got["no-verifier"].outcome.verification is None
    assert "task rewards: 4 verified (mean 0.583), 1 without a verifier, 1 verifier errors" in printed


@pytest.mark.docker
def test_checks_read_the_container_and_report_each_exit_status(tmp_path: Path, terminal_image: str) -> None:
    checks = ["test -f made.txt", "grep -q hello made.txt", "exit 3", "echo 'tricky $HOME \"quotes\"'; true"]
    task = {"id": "docker-checks", "verifier": {"kind": "command", "checks": checks}}
    got, _ = collect(tmp_path, "docker", [{**task, "actions": [{"command": "echo hello > made.txt"}]}])
    verification = got["docker-checks"].outcome.verification
    assert [c["exit_code"] for c in verification.details["checks"]] == [0, 0, 3, 0]
    assert verification.reward == 0.75
    assert 'tricky $HOME "quotes"' in verification.output, json.dumps(verification.output)


# The checks take a moment (a slow first check): long enough for a daemon the agent left to put
# the right answer in place after the episode, unless it is gone by then.
SLOW_CHECKS = {"kind": "command", "checks": ["sleep 2", "grep -qx 3 count.txt"]}
DAEMON = "echo 2 > count.txt; (setsid nohup sh -c 'sleep 1; echo 3 > count.txt' >/dev/null 2>&1 </dev/null &)"
# A git fsmonitor hook that always says "nothing changed": git then takes a modified file as clean.
FSMONITOR = (
    "printf '#!/bin/sh\\nprintf \"tok\\\\0\"\\n' > ~/hook && chmod +x ~/hook"
    " && git config core.fsmonitor ~/hook && git status --short"
    " && git update-index --fsmonitor && git status --short"
)


@pytest.mark.parametrize(
    "backend",
    [pytest.param("docker", marks=pytest.mark.docker), pytest.param("bwrap", marks=pytest.mark.bwrap)],
)
def test_the_agents_leftover_processes_and_tools_cannot_sway_the_checks(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue("terminal_image" if backend == "docker" else "bwrap")
    tasks = [
        {"id": "honest", "verifier": SLOW_CHECKS, "actions": [{"command": "echo 3 > count.txt"}]},
        {"id": "daemon", "verifier": SLOW_CHECKS, "actions": [{"command": DAEMON}]},
        {
            **embedded(
                "git-restore",
                [
                    {"command": "cd repo"},
                    {"command": FSMONITOR},
                    {"command": "echo oops > stock.py"},
                    {"command": "git diff --quiet -- stock.py && echo looks clean"},
                ],
            ),
            "id": "fsmonitor",
        },
    ]
    got, _ = collect(tmp_path, backend, tasks)
    assert got["honest"].outcome.reward == 1.0
    # The daemon was killed with the agent's shell: the file keeps the 2 the episode left.
    daemon = got["daemon"].outcome.verification
    assert [c["passed"] for c in daemon.details["checks"]] == [True, False], daemon.output
    # The agent's own git saw the broken file as clean; the check's git did not use its hook.
    fooled = got["fsmonitor"]
    assert "looks clean" in fooled.steps[-1].observation.text
    assert fooled.outcome.reward == 0.0, fooled.outcome.verification.output

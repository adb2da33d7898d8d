"""MCP task verifiers through the real runner: the real filesystem, git and memory servers in
bwrap. The oracle (each task's scripted calls) scores 1; a wrong end state scores 0 or its
documented partial share; answer-only tasks get no verification."""

from __future__ import annotations

import copy
from pathlib import Path

from collectors.tasks import TaskSpec, embedded_tasks
from sandboxes.mcp import McpSandbox, parse_action
from tests.sandboxes.scripted_runs import run_scripted

EMBEDDED = {spec.id: spec for spec in embedded_tasks("mcp")}
TODO = "/home/agent/workdir/notes/todo.txt"
REPO = "/home/agent/workdir"


def call(name: str, **arguments: object) -> dict:
    return {"kind": "tool_call", "arguments": {"name": name, "arguments": arguments}}


def variant(task_id: str, new_id: str, actions: list[dict]) -> TaskSpec:
    spec = copy.deepcopy(EMBEDDED[task_id])
    spec.task.id, spec.actions = new_id, actions
    return spec


def test_the_oracle_scores_1_and_wrong_end_states_score_their_share(installed: None, tmp_path: Path) -> None:
    oracle = ["fs-todo-add", "fs-csv-total", "git-commit-branch", "memory-team", "memory-cleanup"]
    team = EMBEDDED["memory-team"].actions
    specs = [EMBEDDED[task_id] for task_id in oracle] + [
        EMBEDDED["time-now-tokyo"],
        variant(
            "fs-todo-add", "todo-overwritten", [call("write_file", path=TODO, content="water the plants\n")]
        ),
        variant(
            "fs-todo-add",
            "todo-lost-a-line",
            [
                call(
                    "edit_file",
                    path=TODO,
                    edits=[{"oldText": "call the plumber", "newText": "water the plants"}],
                )
            ],
        ),
        variant(
            "fs-csv-total", "wrong-total", [call("write_file", path=f"{REPO}/data/total.txt", content="7\n")]
        ),
        variant(
            "git-commit-branch",
            "committed-on-main",
            [
                call("git_add", repo_path=REPO, files=["calc.py"]),
                call("git_commit", repo_path=REPO, message="mul"),
            ],
        ),
        variant("memory-team", "team-without-relations", team[:1]),
    ]
    summary, found = run_scripted(
        "mcp", McpSandbox, parse_action, specs, tmp_path / "data", max_steps=10, sandboxes=2
    )
    assert summary.outcomes == {"completed": len(specs)}, summary.outcomes
    rewards = {task_id: t.outcome.reward for task_id, t in found.items()}
    assert rewards == {
        **dict.fromkeys(oracle, 1.0),
        "time-now-tokyo": None,
        "todo-overwritten": 0.0,  # the line is there, the three others are gone
        "todo-lost-a-line": 2 / 3,
        "wrong-total": 0.0,
        "committed-on-main": 0.0,  # the tree is clean, but no branch, and main moved
        "team-without-relations": 3 / 5,
    }
    assert found["time-now-tokyo"].outcome.verification is None
    graph = found["memory-team"].outcome.verification
    assert graph is not None and graph.verifier == "memory_graph" and not graph.error
    assert "PASS relation Bob manages Project_Apollo" in graph.output and graph.elapsed_s < 5.0
    # the graph was read outside the recorded steps
    assert [s.action.arguments["name"] for s in found["memory-team"].steps][-1] == "read_graph"
    assert len(found["memory-team"].steps) == len(EMBEDDED["memory-team"].actions)
    lost = found["todo-lost-a-line"].outcome.verification
    assert lost is not None and "FAIL keep: notes/todo.txt has the line 'call the plumber'" in lost.output
    main = found["committed-on-main"].outcome.verification
    assert main is not None and main.details["failed"][0] == "branch feature/mul exists"


def test_the_answer_only_tasks_say_why_they_have_no_verifier() -> None:
    checkable = [s for s in EMBEDDED.values() if s.task.verifier["kind"] != "none"]
    assert {s.task.verifier["kind"] for s in checkable} == {"files", "git_repo", "memory_graph"}
    assert len(checkable) >= 5 and all(spec.actions for spec in checkable)
    for spec in EMBEDDED.values():
        if spec.task.verifier["kind"] == "none":
            assert spec.task.verifier["reason"] and spec.task.metadata["server"] in (
                "time",
                "git",
                "fetch",
                "filesystem",
            )

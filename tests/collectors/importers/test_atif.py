"""ATIF (Harbor's trajectory.json) through the real CLI: our own captures out and back in exactly,
files Harbor's agents write (built with harbor's own models in its venv, and one by hand in Terminus
2's shape), and malformed files that go to the dead-letter file with their reason."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from schemas import TrajectoryWriter, read_trajectories
from schemas.__main__ import main as schemas_main
from schemas.invalid_actions import invalid_action, invalid_action_observation
from schemas.records import Attachment, Outcome, Trajectory, Verification
from tests.collectors.conftest import run_import
from tests.schemas.factories import SCREENSHOT, rich_trajectory
from tests.schemas.harbor_venv import harbor_validate, run_harbor

TESTS = Path(__file__).resolve().parents[2]
TERMINAL_RUN = TESTS / "beam_pipelines" / "fixtures" / "terminal_run"
MCP_V2 = TESTS / "schemas" / "fixtures" / "trajectories_v2.parquet"
V1 = TESTS / "schemas" / "fixtures" / "trajectories_v1.parquet"  # terminal, web, and mcp with no step
# What an import keeps of the trajectory it reads: all but the id (the import's resume key) and the
# provenance (the import's own, its source naming the file).
KEPT = ("domain", "environment", "task", "policy", "initial_observation", "steps", "outcome")
PROMPT = (
    "You are an AI assistant tasked with solving command-line tasks in a Linux environment.\n\n"
    "Task Description:\nCreate hello.txt containing 'Hello, world!'\n\n"
    "Current terminal state:\nroot@c0ffee:/app#\n"
)


def terminus_run() -> dict:
    """A trajectory.json in the shape Terminus 2 writes (harbor 0.25.0,
    harbor/agents/terminus_2/terminus_2.py): the prompt as the first user step; each episode an
    agent step whose commands are `bash_command` calls `call_<episode>_<n>`, one result (naming the
    call only when there is one command), a parse error as a step without calls, and the end as a
    `mark_task_complete` call."""
    output = "root@c0ffee:/app# ls -la\ntotal 0\nroot@c0ffee:/app# "
    return {
        "schema_version": "ATIF-v1.6",
        "session_id": "5e1c7a55-session",
        "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "openai/gpt-4o"},
        "steps": [
            {"step_id": 1, "timestamp": "2025-11-02T10:00:00Z", "source": "user", "message": PROMPT},
            {
                "step_id": 2,
                "timestamp": "2025-11-02T10:00:04.5Z",
                "source": "agent",
                "model_name": "openai/gpt-4o",
                "message": "Analysis: an empty folder.\nPlan: look first.",
                "tool_calls": [
                    {
                        "tool_call_id": "call_0_1",
                        "function_name": "bash_command",
                        "arguments": {"keystrokes": "ls -la\n", "duration": 0.1},
                    }
                ],
                "observation": {"results": [{"source_call_id": "call_0_1", "content": output}]},
                "metrics": {"prompt_tokens": 812, "completion_tokens": 95, "cost_usd": 0.0031},
            },
            {
                "step_id": 3,
                "timestamp": "2025-11-02T10:00:09Z",
                "source": "agent",
                "message": "I will write the file",
                "observation": {
                    "results": [{"content": "Previous response had parsing errors:\nERROR: no JSON"}]
                },
            },
            {
                "step_id": 4,
                "timestamp": "2025-11-02T10:00:13Z",
                "source": "agent",
                "message": "Analysis: write it, then show it.",
                "tool_calls": [
                    {
                        "tool_call_id": "call_2_1",
                        "function_name": "bash_command",
                        "arguments": {"keystrokes": "echo 'Hello, world!' > hello.txt\n", "duration": 0.1},
                    },
                    {
                        "tool_call_id": "call_2_2",
                        "function_name": "bash_command",
                        "arguments": {"keystrokes": "cat hello.txt\n", "duration": 0.5},
                    },
                    {
                        "tool_call_id": "call_2_task_complete",
                        "function_name": "mark_task_complete",
                        "arguments": {},
                    },
                ],
                "observation": {"results": [{"content": "root@c0ffee:/app# cat hello.txt\nHello, world!\n"}]},
            },
        ],
        "final_metrics": {"total_prompt_tokens": 2210, "total_completion_tokens": 301, "total_steps": 4},
    }


def write_sample(directory: Path) -> Path:
    """A Harbor job folder: one trial with its agent/trajectory.json (Terminus 2's shape) and the
    trial's other files, which the importer does not read."""
    job = directory / "atif" / "jobs" / "2025-11-02__10-00-00"
    trial = job / "hello-world__Xk3p9Qz" / "agent"
    trial.mkdir(parents=True)
    (trial / "trajectory.json").write_text(json.dumps(terminus_run(), indent=2))
    (trial.parent / "result.json").write_text(json.dumps({"verifier_result": {"rewards": {"reward": 1.0}}}))
    (job / "config.json").write_text("{}")
    return job


def assert_kept(imported: Trajectory, original: Trajectory) -> None:
    for name in KEPT:
        assert getattr(imported, name) == getattr(original, name), name
    assert imported.provenance.started_at == original.provenance.started_at
    assert imported.provenance.source.row_id == f"{original.trajectory_id}/agent/trajectory.json"


def export_and_import(source: Path, tmp_path: Path) -> tuple[list[Trajectory], Path]:
    atif = tmp_path / "atif"
    assert schemas_main(["export-atif", str(source), "--out", str(atif)]) == 0
    report = harbor_validate(sorted(atif.glob("*/agent/trajectory.json")))
    assert all(entry["valid"] for entry in report.values()), report
    out = tmp_path / "imported"
    done = run_import("atif", atif, out, "--dataset", "our-captures")
    assert done.returncode == 0, done.stderr
    return list(read_trajectories(str(out), validate=True)), out


def test_real_terminal_captures_round_trip_exactly(tmp_path: Path):
    originals = {t.trajectory_id: t for t in read_trajectories(str(TERMINAL_RUN))}
    imported, out = export_and_import(TERMINAL_RUN, tmp_path)
    assert len(imported) == 12 and sum(len(t.steps) for t in imported) == 94
    for t in imported:
        assert_kept(t, originals[t.provenance.source.row_id.split("/")[0]])
    (batch,) = [t for t in imported if t.provenance.source.row_id.startswith("terminal-s0-000003-")]
    assert batch.steps[7].action.text == '"sleep 30" (0.1s); Enter (0.5s)'
    assert batch.steps[7].observation.text.endswith("agent@sandbox:~$ sleep 30")
    assert batch.steps[3].observation.data["exit_code"] == 1
    assert [s.done for s in batch.steps] == [False] * 8 and batch.outcome.status == "truncated"

    rerun = run_import("atif", tmp_path / "atif", out, "--dataset", "our-captures")
    assert "already imported by an earlier run (skipped): 12" in rerun.stdout


def test_attachments_tools_invalid_actions_verdicts_and_other_domains_round_trip(tmp_path: Path):
    rich = rich_trajectory()
    rich.steps.append(
        replace(
            rich.steps[0],
            index=2,
            action=invalid_action("hello?", "no JSON object in the reply"),
            observation=invalid_action_observation("no JSON object in the reply"),
            info={"simulated": False},
        )
    )
    verdict = Verification(verifier="command", reward=1.0, output="ok\n", details={"checks": [True]})
    rich.outcome = Outcome(status="completed", reward=1.0, verification=verdict)
    root = tmp_path / "data"
    with TrajectoryWriter(str(root)) as writer:
        writer.write(rich)
        for t in [*read_trajectories(str(MCP_V2)), *read_trajectories(str(V1))]:
            if t.domain == "web":  # the fixture holds its screenshot's reference, not the blob
                t.initial_observation.attachments = [
                    Attachment("screen.png", "image/png", content=SCREENSHOT)
                ]
            writer.write(t)
    originals = {t.trajectory_id: t for t in read_trajectories(str(root))}
    imported, out = export_and_import(root, tmp_path)
    assert sorted(t.domain for t in imported) == ["mcp", "mcp", "terminal", "terminal", "web"]
    for t in imported:
        assert_kept(t, originals[t.provenance.source.row_id.split("/")[0]])
    terminal = next(t for t in imported if t.task.id == rich.task.id)
    assert terminal.steps[2].action.kind == "invalid" and terminal.steps[1].reward == 1.0
    end_png, log = terminal.steps[1].observation.attachments
    assert (out / end_png.uri).read_bytes().startswith(b"\x89PNG") and (
        out / log.uri
    ).read_bytes() == "日本語\n".encode()
    empty = next(t for t in imported if t.provenance.source.row_id.startswith("v1-mcp-0001/"))
    assert empty.steps == [] and empty.outcome.error == "server exited with status 1"
    (click,) = next(t for t in imported if t.domain == "web").steps
    assert click.action.kind == "click"
    mcp = next(t for t in imported if t.environment.tools)
    assert mcp.environment.tools[0].output_schema == {
        "type": "object",
        "properties": {"datetime": {"type": "string"}},
    }


BUILD_WITH_HARBOR = r"""
import struct, sys
from pathlib import Path
from harbor.models.trajectories import (
    Agent, ContentPart, FinalMetrics, ImageSource, Metrics, Observation, ObservationResult, Step,
    SubagentTrajectoryRef, ToolCall, Trajectory,
)
from harbor.utils.trajectory_utils import format_trajectory_json

out = Path(sys.argv[1])
at = "2025-11-03T09:00:0{}+00:00".format


def keys(call_id, text, duration):
    arguments = {"keystrokes": text, "duration": duration}
    return ToolCall(tool_call_id=call_id, function_name="bash_command", arguments=arguments)


def results(*pairs):
    return Observation(results=[ObservationResult(source_call_id=i, content=c) for i, c in pairs])


def write(trajectory, folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trajectory.json").write_text(format_trajectory_json(trajectory.to_json_dict()))


# Terminus 2's shape, its version left at the model's default (1.8 in harbor 0.25.0, as Terminus 2
# writes), with a summarization handoff (a system step) and a copied context step.
handoff = ObservationResult(subagent_trajectory_ref=[
    SubagentTrajectoryRef(session_id="run-7-s", trajectory_path="trajectory.summarization-1-summary.json")
])
done = ToolCall(tool_call_id="call_2_task_complete", function_name="mark_task_complete", arguments={})
terminus = Trajectory(
    session_id="run-7",
    agent=Agent(name="terminus-2", version="2.0.0", model_name="anthropic/claude-sonnet-4"),
    steps=[
        Step(step_id=1, timestamp=at(0), source="user", message="Make /app/run.sh executable."),
        Step(
            step_id=2, timestamp=at(1), source="agent", message="Plan: chmod it.",
            tool_calls=[keys("call_0_1", "chmod +x /app/run.sh\n", 0.1)],
            observation=results(("call_0_1", "root@box:/app# chmod +x /app/run.sh\nroot@box:/app# ")),
            metrics=Metrics(prompt_tokens=640, completion_tokens=41, cached_tokens=512),
        ),
        Step(
            step_id=3, timestamp=at(2), source="system", observation=Observation(results=[handoff]),
            message="Performed context summarization and handoff to continue task.",
        ),
        Step(step_id=4, timestamp=at(3), source="agent", message="Summary.", is_copied_context=True),
        Step(
            step_id=5, timestamp=at(4), source="agent", message="Check and finish.",
            tool_calls=[keys("call_1_1", "ls -l /app/run.sh\n", 0.2)],
            observation=results(("call_1_1", "-rwxr-xr-x 1 root root 20 Nov  3 09:00 /app/run.sh\n")),
        ),
        Step(
            step_id=6, timestamp=at(5), source="agent", message="Done.", tool_calls=[done],
            observation=results((None, "Current terminal state:\nroot@box:/app# \n\nAre you sure?")),
        ),
    ],
    final_metrics=FinalMetrics(total_prompt_tokens=1300, total_completion_tokens=90),
)
write(terminus, out / "terminal" / "chmod-run__a1" / "agent")

# A tool-calling agent in ATIF 1.7: two calls in one step, each result naming its call, one with a
# screenshot beside the file.
png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
tools = [
    {"type": "function", "function": {"name": name, "description": "", "parameters": {"type": "object"}}}
    for name in ("get_current_time", "screenshot")
]
shot = ContentPart(type="image", source=ImageSource(media_type="image/png", path="images/screen.png"))
screen = [ContentPart(type="text", text="1 screen"), shot]
agentic = Trajectory(
    schema_version="ATIF-v1.7", session_id="run-8", trajectory_id="run-8-main",
    agent=Agent(name="codex", version="0.1", model_name="gpt-5", tool_definitions=tools),
    steps=[
        Step(step_id=1, source="user", message="What time is it, and what is on screen?"),
        Step(
            step_id=2, timestamp=at(5), source="agent", message="", llm_call_count=1,
            tool_calls=[
                ToolCall(tool_call_id="a", function_name="get_current_time", arguments={"timezone": "UTC"}),
                ToolCall(tool_call_id="b", function_name="screenshot", arguments={}),
            ],
            observation=Observation(results=[
                ObservationResult(source_call_id="b", content=screen),
                ObservationResult(source_call_id="a", content='{"datetime": "2025-11-03T09:00:05Z"}'),
            ]),
        ),
    ],
)
folder = out / "mcp" / "time__b2" / "agent"
(folder / "images").mkdir(parents=True)
(folder / "images" / "screen.png").write_bytes(png)
write(agentic, folder)
"""


@pytest.fixture(scope="module")
def harbor_files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("harbor-atif")
    run_harbor(BUILD_WITH_HARBOR, str(root))
    return root


def test_a_terminus_run_written_by_harbors_models(harbor_files: Path, tmp_path: Path):
    done = run_import("atif", harbor_files / "terminal", tmp_path / "out", "--dataset", "harbor-runs")
    assert done.returncode == 0, done.stderr
    (t,) = read_trajectories(str(tmp_path / "out"), validate=True)
    assert (t.domain, t.task.id, t.task.instruction) == (
        "terminal",
        "chmod-run__a1",
        "Make /app/run.sh executable.",
    )
    assert [s.action.text for s in t.steps] == [
        '"chmod +x /app/run.sh\\n" (0.1s)',
        '"ls -l /app/run.sh\\n" (0.2s)',
    ]
    assert t.steps[0].action.arguments == {
        "keystrokes": [{"keystrokes": "chmod +x /app/run.sh\n", "duration": 0.1}]
    }
    assert t.steps[1].observation.text == "-rwxr-xr-x 1 root root 20 Nov  3 09:00 /app/run.sh\n"
    assert t.steps[1].observation.format == "terminal_screen"
    assert t.steps[0].info == {
        "atif_step_id": 2,
        "metrics": {"prompt_tokens": 640, "completion_tokens": 41, "cached_tokens": 512},
    }
    assert t.steps[1].info == {"atif_step_id": 5, "task_complete": True}
    assert t.steps[1].started_at.isoformat() == "2025-11-03T09:00:04+00:00"
    assert t.environment.config == {"source_format": "atif", "atif_version": "ATIF-v1.8"}
    assert t.task.metadata["skipped_steps"] == {"copied_context": 1, "without_action": 1}
    assert t.task.metadata["system_messages"] == [
        "Performed context summarization and handoff to continue task."
    ]
    assert t.policy.name == "terminus-2" and t.policy.config["model"] == "anthropic/claude-sonnet-4"
    assert t.policy.config["final_metrics"] == {"total_prompt_tokens": 1300, "total_completion_tokens": 90}
    assert t.initial_observation.data == {"not_recorded": True} and t.outcome.status == "completed"


def test_any_agents_calls_in_the_mcp_domain_with_a_screenshot(harbor_files: Path, tmp_path: Path):
    done = run_import("atif", harbor_files / "mcp", tmp_path / "out", "--domain", "mcp")
    assert done.returncode == 0, done.stderr
    (t,) = read_trajectories(str(tmp_path / "out"), validate=True)
    assert [(s.action.kind, s.action.arguments) for s in t.steps] == [
        ("tool_call", {"name": "get_current_time", "arguments": {"timezone": "UTC"}}),
        ("tool_call", {"name": "screenshot", "arguments": {}}),
    ]
    first = json.loads(t.steps[0].observation.text)
    assert first["content"] == [{"type": "text", "text": '{"datetime": "2025-11-03T09:00:05Z"}'}]
    (shot,) = t.steps[1].observation.attachments
    assert (shot.name, shot.media_type, shot.size) == ("screen.png", "image/png", 29)
    assert (tmp_path / "out" / shot.uri).read_bytes().startswith(b"\x89PNG")
    assert [tool.name for tool in t.environment.tools] == ["get_current_time", "screenshot"]
    assert t.initial_observation.text.startswith(
        "Connected to an MCP server (not named in the source): 2 tools"
    )


def test_terminus_shaped_file_by_hand_and_malformed_files_go_to_dead_letters(tmp_path: Path):
    job = write_sample(tmp_path)
    broken = {
        "no-name": _with_call(terminus_run(), {"tool_call_id": "x", "arguments": {}}),
        "future": {**terminus_run(), "schema_version": "ATIF-v2.0"},
        "not-json": '{"steps": [',
        "escape": _with_image(terminus_run(), "/etc/hostname"),
        "claude": _with_call(terminus_run(), {"tool_call_id": "x", "function_name": "Bash", "arguments": {}}),
    }
    for name, document in broken.items():
        folder = job / f"{name}__0" / "agent"
        folder.mkdir(parents=True)
        text = document if isinstance(document, str) else json.dumps(document)
        (folder / "trajectory.json").write_text(text)
    out = tmp_path / "out"
    done = run_import("atif", job, out)
    assert done.returncode == 0, done.stderr
    assert "imported 1 of 6 rows" in done.stdout and "dead letters: 5 (bad_row 5)" in done.stdout
    reasons = {
        json.loads(line)["row_id"].split("__")[0]: json.loads(line)["reason"]
        for line in (out / "dead_letter" / "import-atif.jsonl").read_text().splitlines()
    }
    assert reasons == {
        "no-name": "missing field 'function_name' of tool_calls[0] of step 2",
        "future": "schema_version 'ATIF-v2.0' is not an ATIF version read here (ATIF-v1.0, ATIF-v1.1, "
        "ATIF-v1.2, ATIF-v1.3, ATIF-v1.4, ATIF-v1.5, ATIF-v1.6, ATIF-v1.7, ATIF-v1.8)",
        "not-json": "the file is not JSON: Expecting value: line 1 column 12 (char 11)",
        "escape": "observation.results[0] of step 2, part 1: '/etc/hostname' is not a relative path inside "
        "the trajectory's folder, so it is not read",
        "claude": "step 2: the call to 'Bash' is not a terminal action (unknown terminal action kind 'Bash'; "
        "expected one of ['command', 'keystrokes']); --domain mcp takes any tool call",
    }
    (t,) = read_trajectories(str(out), validate=True)
    assert t.task.id == "hello-world__Xk3p9Qz" and t.task.instruction == PROMPT
    assert [s.action.arguments["keystrokes"] for s in t.steps] == [
        [{"keystrokes": "ls -la\n", "duration": 0.1}],
        [
            {"keystrokes": "echo 'Hello, world!' > hello.txt\n", "duration": 0.1},
            {"keystrokes": "cat hello.txt\n", "duration": 0.5},
        ],
    ]
    assert t.steps[1].observation.text == "root@c0ffee:/app# cat hello.txt\nHello, world!\n"
    assert [s.done for s in t.steps] == [False, True] and t.steps[1].info["task_complete"] is True
    assert t.task.metadata["skipped_steps"] == {"without_action": 1}
    assert t.steps[0].info["metrics"] == {"prompt_tokens": 812, "completion_tokens": 95, "cost_usd": 0.0031}
    assert t.provenance.started_at.isoformat() == "2025-11-02T10:00:00+00:00"
    assert t.provenance.source.row_id == "hello-world__Xk3p9Qz/agent/trajectory.json"


def _with_call(document: dict, call: dict) -> dict:
    document["steps"][1]["tool_calls"] = [call]
    document["steps"][1]["observation"]["results"][0].pop("source_call_id")
    return document


def _with_image(document: dict, path: str) -> dict:
    result = document["steps"][1]["observation"]["results"][0]
    result["content"] = [
        {"type": "text", "text": result["content"]},
        {"type": "image", "source": {"media_type": "image/png", "path": path}},
    ]
    return document

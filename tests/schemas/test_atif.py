"""`python -m schemas export-atif`: our trajectories as Harbor's ATIF, checked by harbor's own models
and validator (in its venv) and read by harbor's trace exporter. The trajectories are real: the 12
episodes the terminal collector recorded in bwrap (tests/beam_pipelines/fixtures/terminal_run) and
the MCP fixture with tool definitions; a rich one adds attachments. The reading back is
tests/collectors/importers/test_atif.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from schemas import TrajectoryWriter
from schemas.__main__ import main
from schemas.atif import dataset_root, folder_name, to_atif
from schemas.invalid_actions import invalid_action, invalid_action_observation
from schemas.records import Observation
from schemas.storage import read_trajectories
from tests.schemas.factories import rich_trajectory
from tests.schemas.harbor_venv import harbor_conversations, harbor_validate

TESTS = Path(__file__).resolve().parents[1]
TERMINAL_RUN = TESTS / "beam_pipelines" / "fixtures" / "terminal_run"
MCP_V2 = TESTS / "schemas" / "fixtures" / "trajectories_v2.parquet"
WITH_KEYSTROKES = "terminal-s0-000003-bf6dec509f2a"


def export(source: Path, out: Path, *args: str) -> list[Path]:
    assert main(["export-atif", str(source), "--out", str(out), *args]) == 0
    return sorted(out.glob("*/agent/trajectory.json"))


def test_real_terminal_captures_are_valid_atif_for_harbor(tmp_path: Path, capsys):
    files = export(TERMINAL_RUN, tmp_path / "atif")
    assert "wrote 12 ATIF trajectories (106 steps, 0 attachment files)" in capsys.readouterr().out
    report = harbor_validate(files)
    assert [entry["errors"] for entry in report.values()] == [[]] * 12
    assert {entry["version"] for entry in report.values()} == {"ATIF-v1.7"}
    assert sorted(entry["steps"] for entry in report.values()) == [7] + [9] * 11  # the task and each step
    assert {entry["agent"] for entry in report.values()} == {"explorer"}

    document = json.loads((tmp_path / "atif" / WITH_KEYSTROKES / "agent" / "trajectory.json").read_text())
    assert document["session_id"] == document["trajectory_id"] == WITH_KEYSTROKES
    task, first, last = document["steps"][0], document["steps"][1], document["steps"][8]
    assert task["source"] == "user"
    assert task["message"] == "Show how much disk space each top-level folder uses."
    assert task["observation"] == {"results": [{"content": "agent@sandbox:~$"}]}
    assert first["tool_calls"] == [
        {
            "tool_call_id": "call_1",
            "function_name": "command",
            "arguments": {"command": "grep -rn sandbox . | head -n 8", "timeout": 10.0},
        }
    ]
    assert first["observation"]["results"] == [
        {
            "source_call_id": "call_1",
            "content": "agent@sandbox:~$ grep -rn sandbox . | head -n 8\nagent@sandbox:~$",
        }
    ]
    assert first["extra"]["agentworld"]["observation"]["data"]["exit_code"] == 0
    # The keystrokes action is Terminus 2's form: one bash_command per item, one output for them all.
    assert [(c["function_name"], c["arguments"]) for c in last["tool_calls"]] == [
        ("bash_command", {"duration": 0.1, "keystrokes": "sleep 30"}),
        ("bash_command", {"duration": 0.5, "keystrokes": "Enter"}),
    ]
    assert "source_call_id" not in last["observation"]["results"][0]
    assert last["message"] == '"sleep 30" (0.1s); Enter (0.5s)'
    assert "action" not in last["extra"]["agentworld"]  # the calls give it back
    assert document["extra"]["agentworld"]["outcome"]["status"] == "truncated"
    assert document["final_metrics"] == {"total_steps": 9}


def test_harbors_trace_exporter_reads_our_file(tmp_path: Path):
    export(TERMINAL_RUN, tmp_path / "atif")
    conversations = harbor_conversations(tmp_path / "atif" / WITH_KEYSTROKES / "agent" / "trajectory.json")
    assert len(conversations) == 8  # one per agent step
    second = conversations[1]
    assert second[0] == {"role": "user", "content": "Show how much disk space each top-level folder uses."}
    call = {"name": "command", "arguments": {"command": "grep -rn sandbox . | head -n 8", "timeout": 10.0}}
    tool_call = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
    assert second[1] == {"role": "assistant", "content": f"grep -rn sandbox . | head -n 8\n{tool_call}"}
    assert second[2] == {
        "role": "user",
        "content": "agent@sandbox:~$ grep -rn sandbox . | head -n 8\nagent@sandbox:~$",
    }


def test_version_1_6_has_no_document_id_and_still_validates(tmp_path: Path):
    files = export(TERMINAL_RUN, tmp_path / "atif", "--atif-version", "1.6")
    report = harbor_validate(files[:2])
    assert [(entry["valid"], entry["version"]) for entry in report.values()] == [(True, "ATIF-v1.6")] * 2
    document = json.loads(files[0].read_text())
    assert "trajectory_id" not in document and document["session_id"] == files[0].parents[1].name


def test_mcp_tools_are_openai_function_definitions_and_output_schemas_extra(tmp_path: Path):
    (file,) = export(MCP_V2, tmp_path / "atif")
    assert harbor_validate([file])[str(file)]["valid"]
    document = json.loads(file.read_text())
    tools = document["agent"]["tool_definitions"]
    assert [t["function"]["name"] for t in tools] == ["get_current_time", "convert_time"]
    assert tools[0]["type"] == "function" and tools[0]["function"]["parameters"]["required"] == ["timezone"]
    assert document["extra"]["agentworld"]["tool_output_schemas"] == {
        "get_current_time": {"type": "object", "properties": {"datetime": {"type": "string"}}}
    }
    (call,) = document["steps"][1]["tool_calls"]
    assert call["function_name"] == "get_current_time"  # the MCP tool itself, not our `tool_call` kind
    assert "action" not in document["steps"][1]["extra"]["agentworld"]


def test_attachments_are_copied_beside_the_file_and_images_are_content_parts(tmp_path: Path, capsys):
    root = tmp_path / "data"
    rich = rich_trajectory()
    rich.steps.append(
        replace(
            rich.steps[1],
            index=2,
            action=invalid_action("hello?", "no JSON object in the reply"),
            observation=invalid_action_observation("no JSON object in the reply"),
            reward=None,
            done=False,
        )
    )
    with TrajectoryWriter(str(root)) as writer:
        writer.write(rich)
    (file,) = export(root, tmp_path / "atif")
    assert "wrote 1 ATIF trajectories (4 steps, 2 attachment files)" in capsys.readouterr().out
    entry = harbor_validate([file])[str(file)]  # its image check finds every image beside the file
    assert (entry["valid"], entry["multimodal"], entry["errors"]) == (True, True, [])
    (stored,) = read_trajectories(str(root))
    end_png, log = stored.steps[1].observation.attachments
    document = json.loads(file.read_text())
    content = document["steps"][2]["observation"]["results"][0]["content"]
    assert content == [
        {"type": "text", "text": "\x1b[1mhéllo 🌍\x1b[0m\nroot@box:/w# "},
        {"type": "image", "source": {"media_type": "image/png", "path": f"attachments/{end_png.sha256}.png"}},
    ]
    listed = document["steps"][2]["extra"]["agentworld"]["observation"]["attachments"]
    assert [(a["name"], a["path"]) for a in listed] == [
        ("end.png", f"attachments/{end_png.sha256}.png"),
        ("log.txt", f"attachments/{log.sha256}"),
    ]
    assert (file.parent / "attachments" / log.sha256).read_bytes() == "日本語\n".encode()
    invalid = document["steps"][3]
    assert "tool_calls" not in invalid and invalid["message"] == "hello?"
    assert invalid["extra"]["agentworld"]["action"] == {
        "kind": "invalid",
        "arguments": {"raw": "hello?", "error": "no JSON object in the reply"},
    }


def test_a_trajectory_whose_attachment_is_missing_is_skipped_and_the_rest_written(tmp_path: Path, capsys):
    root = tmp_path / "data"
    rich = rich_trajectory()
    rich.initial_observation = rich.steps[1].observation = Observation("terminal_screen", "$ ")
    with TrajectoryWriter(str(root)) as writer:
        writer.write(rich_trajectory("with-blobs"))
        writer.write(replace(rich, trajectory_id="no-blobs"))
    for blob in (root / "attachments").rglob("*"):
        if blob.is_file():
            blob.unlink()
    out = tmp_path / "atif"
    assert main(["export-atif", str(root), "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "wrote 1 ATIF trajectories" in printed and "not written: 1" in printed
    assert "with-blobs: cannot read attachment attachments/sha256/" in printed
    assert [p.parents[1].name for p in out.glob("*/agent/trajectory.json")] == ["no-blobs"]


def test_unknown_version_is_refused():
    (t,) = read_trajectories(str(MCP_V2))
    with pytest.raises(ValueError, match=r"ATIF version 'ATIF-v1\.8' is not written; choose ATIF-v1\.6 or"):
        to_atif(t, "ATIF-v1.8")


def test_dataset_root_and_folder_names():
    assert dataset_root("data/run") == "data/run"
    assert dataset_root("s3://b/run/domain=web/part-1.parquet") == "s3://b/run"
    assert dataset_root("data/run/shard-0-of-2/domain=web/*.parquet") == "data/run"
    assert folder_name("openai_chat-1f2e") == "openai_chat-1f2e"
    assert folder_name("../x/y z") == "_x_y_z"

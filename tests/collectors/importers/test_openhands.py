"""OpenHands / SWE-Gym trajectories through the real CLI: Parquet files laid out as the Hub stores
SWE-Gym/OpenHands-Sampled-Trajectories (OpenAI tool calls) and SWE-Gym/OpenHands-SFT-Trajectories
(the `.oss` text form of the calls), converted to our swe tools, validated and written; a bad row
to the dead-letter file; a rerun resumes. Then the real public files as published (OpenHands' own
event history, SWE-Play's text form, SWE-Gym's sampled rows), read from ../shared/public-samples."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.importers.openhands import bash_output
from collectors.importers.swe_common import editor_turn
from schemas import read_trajectories
from tests.collectors.conftest import run_import

REPO = "/workspace/getmoto__moto__4.1"
TASK = (
    f"<uploaded_files>\n{REPO}\n</uploaded_files>\n"
    "I've uploaded a python code repository ... <pr_description>\nFix f\n"
)
SHELL = (
    "[Python Interpreter: /opt/miniconda3/envs/testbed/bin/python]\nroot@openhands-workspace:" + REPO + " # "
)

CALL = pa.struct(
    [
        ("function", pa.struct([("arguments", pa.string()), ("name", pa.string())])),
        ("id", pa.string()),
        ("index", pa.int64()),
        ("type", pa.string()),
    ]
)
RAW_MESSAGE = pa.struct(
    [
        ("content", pa.string()),
        ("function_call", pa.string()),
        ("name", pa.string()),
        ("role", pa.string()),
        ("tool_call_id", pa.string()),
        ("tool_calls", pa.list_(CALL)),
    ]
)
RAW = pa.schema(
    [
        ("instance_id", pa.string()),
        ("run_id", pa.string()),
        ("resolved", pa.bool_()),
        ("messages", pa.list_(RAW_MESSAGE)),
        ("test_result", pa.string()),
    ]
)
OSS = pa.schema([("messages", pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())])))])


def _msg(
    role: str, content: str = "", name: str | None = None, call_id: str | None = None, calls=None
) -> dict:
    return {
        "content": content,
        "function_call": None,
        "name": name,
        "role": role,
        "tool_call_id": call_id,
        "tool_calls": calls,
    }


def _call(call_id: str, name: str, arguments: dict | str) -> dict:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"function": {"arguments": text, "name": name}, "id": call_id, "index": None, "type": "function"}


def _exchange(call_id: str, name: str, arguments: dict | str, result: str, said: str = "") -> list[dict]:
    return [
        _msg("assistant", said, calls=[_call(call_id, name, arguments)]),
        _msg("tool", "OBSERVATION:\n" + result, name=name, call_id=call_id),
    ]


def write_sample(directory: Path) -> Path:
    """A folder of two Parquet files: two tool-call rows (resolved, unresolved) and one row in the
    `.oss` text form."""
    core = f"{REPO}/moto/core.py"
    view = {"command": "view", "path": core, "view_range": [1, 3]}
    replace = {"command": "str_replace", "path": core, "old_str": "    return 1", "new_str": "    return 2"}
    resolved = [
        _msg("system", "You are a helpful assistant that can interact with a computer to solve tasks."),
        _msg("user", TASK),
        *_exchange(
            "c1",
            "str_replace_editor",
            view,
            f"Here's the result of running `cat -n` on {core}:\n"
            "     1\timport os\n     2\t\n     3\tdef f():\n",
            said="Let me look at the code.",
        ),
        _msg("assistant", "", calls=[_call("c2", "think", {"thought": "f returns the wrong value"})]),
        _msg("tool", "OBSERVATION:\nYour thought has been logged.", name="think", call_id="c2"),
        *_exchange(
            "c3",
            "str_replace_editor",
            replace,
            f"The file {core} has been edited. "
            f"Here's the result of running `cat -n` on a snippet of {core}:\n"
            "     2\t\n     3\tdef f():\n     4\t    return 2\n     5\t\n"
            "Review the changes and make sure they are as expected. Edit the file again if necessary.",
        ),
        *_exchange(
            "c4",
            "execute_bash",
            {"command": "python -c 'import moto'"},
            f"ok\n{SHELL}\n[Command finished with exit code 0]",
        ),
        _msg("assistant", "", calls=[_call("c5", "finish", {"message": "Fixed f."})]),
    ]
    created = {"command": "create", "path": f"{REPO}/repro.py", "file_text": "print(1)\n"}
    unresolved = [
        _msg("system", "You are a helpful assistant."),
        _msg("user", TASK),
        *_exchange("d1", "str_replace_editor", created, f"File created successfully at: {REPO}/repro.py"),
        *_exchange(
            "d2",
            "execute_bash",
            {"command": "python repro.py"},
            f"Traceback ...\n{SHELL}\n[Command finished with exit code 1]",
        ),
        *_exchange(
            "d3",
            "str_replace_editor",
            {"command": "undo_edit", "path": f"{REPO}/repro.py"},
            "Last edit undone.",
        ),
    ]
    raw_rows = [
        {
            "instance_id": "getmoto__moto-5000_0",
            "run_id": "gpt-4o-2024-08-06_maxiter_50_N_v2.1-run_1",
            "resolved": True,
            "messages": resolved,
            "test_result": '{"report": {"resolved": true}}',
        },
        {
            "instance_id": "getmoto__moto-5001_0",
            "run_id": "gpt-4o-2024-08-06_maxiter_50_N_v2.1-run_1",
            "resolved": False,
            "messages": unresolved,
            "test_result": None,
        },
    ]
    oss = [
        {"role": "system", "content": "You are OpenHands agent ..."},
        {"role": "user", "content": TASK},
        {
            "role": "assistant",
            "content": "Run the tests.\n\n<function=execute_bash>\n"
            "<parameter=command>\npytest -q\n</parameter>\n</function>",
        },
        {
            "role": "user",
            "content": "EXECUTION RESULT of [execute_bash]:\n"
            f"1 passed\n{SHELL}\n[Command finished with exit code 0]",
        },
        {
            "role": "assistant",
            "content": "<function=str_replace_editor>\n<parameter=command>view</parameter>\n"
            f"<parameter=path>{REPO}/setup.py</parameter>\n"
            "<parameter=view_range>[2, 2]</parameter>\n</function>",
        },
        {
            "role": "user",
            "content": "EXECUTION RESULT of [str_replace_editor]:\n"
            f"Here's the result of running `cat -n` on {REPO}/setup.py:\n     2\tsetup()\n",
        },
        {"role": "assistant", "content": "<function=finish>\n</function>"},
    ]
    folder = directory / "openhands" / "data"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(raw_rows, schema=RAW), folder / "train.raw-00000-of-00001.parquet")
    pq.write_table(
        pa.Table.from_pylist([{"messages": oss}], schema=OSS),
        folder / "train.success.oss-00000-of-00001.parquet",
    )
    return folder


def write_malformed(folder: Path) -> None:
    """A second file of the tool-call layout whose one row has arguments that are not JSON."""
    broken = [_msg("user", TASK), *_exchange("e1", "execute_bash", "{not json", "x")]
    row = {"instance_id": "getmoto__moto-5002_0", "run_id": "r", "resolved": False, "messages": broken}
    table = pa.Table.from_pylist([{**row, "test_result": None}], schema=RAW)
    pq.write_table(table, folder / "train.raw-00001-of-00002.parquet")


def test_trajectories_import_as_swe_tools(tmp_path: Path) -> None:
    source, out = write_sample(tmp_path), tmp_path / "out"
    write_malformed(source)
    done = run_import("openhands", source, out)
    assert done.returncode == 0, done.stderr
    assert "imported 3 of 4 rows" in done.stdout
    found = {t.task.id: t for t in read_trajectories(str(out), validate=True)}
    assert set(found) == {
        "getmoto__moto-5000_0",
        "getmoto__moto-5001_0",
        "train.success.oss-00000-of-00001.parquet#0",
    }

    solved = found["getmoto__moto-5000_0"]
    assert solved.initial_observation.text == f"Repository getmoto/moto at {REPO}."
    assert solved.task.instruction == TASK and solved.task.metadata["final_message"] == "Fixed f."
    view, edit, bash = solved.steps
    assert view.action.text == f"read(path='{REPO}/moto/core.py', start_line=1, end_line=3)"
    assert view.observation.text == "     1\timport os\n     2\t\n     3\tdef f():\n"
    assert view.info["thought"] == "Let me look at the code."
    assert edit.action.kind == "edit" and edit.action.arguments["command"] == "str_replace"
    assert edit.info["thought"] == "f returns the wrong value"  # the think call is no step
    diff = (
        "--- a/moto/core.py\n+++ b/moto/core.py\n@@ -2,4 +2,4 @@\n"
        " \n def f():\n-    return 1\n+    return 2\n \n"
    )
    assert edit.observation.text == diff and edit.observation.data["diff"] == diff
    assert bash.action.text == "bash(command=\"python -c 'import moto'\")"
    assert bash.observation.text == "ok\n[exit status: 0]" and bash.observation.data["exit_status"] == 0
    assert bash.info["shell"]["python"] == "/opt/miniconda3/envs/testbed/bin/python"
    assert solved.outcome.reward == 1.0 and solved.outcome.verification.verifier == "imported:swe-gym-tests"
    assert solved.policy.config["run_id"].startswith("gpt-4o")
    assert solved.provenance.source.format == "openhands"
    assert solved.provenance.source.dataset == "SWE-Gym/OpenHands-SFT-Trajectories"

    failed = found["getmoto__moto-5001_0"]
    create, run, undo = failed.steps
    assert create.action.text == f"edit(command='create', path='{REPO}/repro.py', file_text='print(1)\\n')"
    assert create.observation.text == "--- /dev/null\n+++ b/repro.py\n@@ -0,0 +1 @@\n+print(1)\n"
    assert run.observation.text == "Traceback ...\n[exit status: 1]"
    assert undo.action.kind == "invalid" and "undo_edit has no equivalent" in undo.observation.text
    assert undo.observation.data["recorded"] == "Last edit undone."
    assert failed.outcome.reward == 0.0

    text_form = found["train.success.oss-00000-of-00001.parquet#0"]
    tests, view = text_form.steps
    assert view.action.text == f"read(path='{REPO}/setup.py', start_line=2, end_line=2)"
    assert view.observation.text == "     2\tsetup()\n"
    assert (
        tests.action.text == "bash(command='pytest -q')"
        and tests.observation.text == "1 passed\n[exit status: 0]"
    )
    assert tests.info["thought"] == "Run the tests." and text_form.outcome.reward is None

    dead = [
        json.loads(line) for line in (out / "dead_letter" / "import-openhands.jsonl").read_text().splitlines()
    ]
    assert [d["row_id"] for d in dead] == ["train.raw-00001-of-00002.parquet#0"]
    assert "arguments are not JSON" in dead[0]["reason"]

    again = run_import("openhands", source, out)
    assert again.returncode == 0, again.stderr
    assert "imported 0 of 4 rows" in again.stdout
    assert len(list(read_trajectories(str(out)))) == 3


def test_bash_output_keeps_a_still_running_command_as_recorded() -> None:
    running = "Starting server\n[Command still running...]\n[Command finished with exit code -1]"
    assert bash_output(running) == (running, None, {})
    newer = (
        "done\n[The command completed with exit code 2.]\n[Current working directory: /w]\n"
        "[Command finished with exit code 2]"
    )
    assert bash_output(newer) == ("done\n", 2, {"cwd": "/w"})


def test_insert_answers_with_our_diff_and_an_unmatched_snippet_keeps_the_recorded_text() -> None:
    path = f"{REPO}/moto/core.py"
    snippet = (
        f"The file {path} has been edited. "
        "Here's the result of running `cat -n` on a snippet of the edited file:\n"
        "     9\tx = 1\n    10\timport os\n    11\ty = 2\n"
        "Review the changes and make sure they are as expected."
    )
    insert = editor_turn(
        {"command": "insert", "path": path, "insert_line": "9", "new_str": "import os"}, snippet, REPO
    )
    assert insert.action.text == f"edit(command='insert', path='{path}', new_str='import os', insert_line=9)"
    assert (
        insert.observation.text
        == "--- a/moto/core.py\n+++ b/moto/core.py\n@@ -9,2 +9,3 @@\n x = 1\n+import os\n y = 2\n"
    )
    # A snippet that does not show new_str (OpenHands expands tabs in it) cannot be undone: kept as recorded.
    tabbed = editor_turn(
        {"command": "str_replace", "path": path, "old_str": "a", "new_str": "\tb"}, snippet, REPO
    )
    assert tabbed.observation.text == snippet and tabbed.observation.data["diff"] == ""


# Real public files (see SOURCES.md there): never copied into the repository, read where they lie.
SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "public-samples" / "openhands"


def _sample(name: str) -> Path:
    path = SAMPLES / name
    assert path.is_file(), f"{path} is missing: the public samples must sit beside the repository"
    return path


def _imported(source: Path, out: Path, rows: int) -> dict:
    done = run_import("openhands", source, out)
    assert done.returncode == 0, done.stderr
    assert f"imported {rows} of {rows} rows" in done.stdout, done.stdout
    assert not (out / "dead_letter").exists()
    return {t.task.id: t for t in read_trajectories(str(out), validate=True)}


def test_openhands_own_event_history_is_one_run(tmp_path: Path) -> None:
    found = _imported(_sample("openhands_native_event_history_basic.json"), tmp_path / "out", 1)
    run = found["openhands_native_event_history_basic.json"]  # the file is the run: its name is the id
    assert run.task.instruction == (
        "Please create a simple 2048 game. No need to run it. "
        "Please finish the interaction after your finish coding."
    )
    assert run.initial_observation.text == "Repository at /workspace."
    (create,) = run.steps
    assert create.action.kind == "edit" and create.action.arguments["command"] == "create"
    assert create.action.arguments["path"] == "/workspace/game_2048.py"
    assert create.action.arguments["file_text"].startswith(
        "import random\nimport keyboard\n\nclass Game2048:\n"
    )
    assert create.observation.text.startswith(
        "--- /dev/null\n+++ b/game_2048.py\n@@ -0,0 +1,117 @@\n"
        "+import random\n+import keyboard\n+\n+class Game2048:\n"
    )
    assert create.info["thought"] == (
        "I'll help you create a simple 2048 game in Python. "
        "I'll use the str_replace_editor to create the file."
    )
    assert run.task.metadata["final_message"].startswith(
        "I've created a simple implementation of the 2048 game with the following features:\n\n"
        "1. A 4x4 game board\n"
    )
    assert run.policy.config == {"agent": "OpenHands", "run_id": "", "model": "claude-3-5-sonnet-20241022"}
    assert run.outcome.status == "completed" and run.outcome.reward is None


def test_event_histories_as_rows_and_the_events_own_arguments(tmp_path: Path) -> None:
    """The evaluation harness's rows (`history` beside `instance_id`), here the real file's events; and
    events without tool-call metadata, whose calls come from `args` (a run with its exit code in
    `extras.metadata`, a read), one per JSON line."""
    events = json.loads(_sample("openhands_native_event_history_basic.json").read_text())
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"instance_id": "getmoto__moto-7000", "resolved": False, "history": events})
        + "\n"
        + json.dumps({"instance_id": "getmoto__moto-7001", "history": [events[0], "not an event"]})
        + "\n"
    )
    done = run_import("openhands", rows, tmp_path / "rows")
    assert done.returncode == 0 and "imported 1 of 2 rows" in done.stdout, done.stdout + done.stderr
    (row,) = read_trajectories(str(tmp_path / "rows"), validate=True)
    assert row.task.id == "getmoto__moto-7000" and len(row.steps) == 1 and row.outcome.reward == 0.0
    assert row.initial_observation.text == "Repository getmoto/moto at /workspace."
    letter = json.loads((tmp_path / "rows" / "dead_letter" / "import-openhands.jsonl").read_text())
    assert letter["row_id"] == "rows.jsonl#1" and letter["reason"] == "event 1 is a str, not an object"

    run_metadata = {"exit_code": 3, "working_dir": "/workspace", "py_interpreter_path": "/usr/bin/python"}
    plain = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "List the files."}},
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls", "thought": "Look first."}},
        {"id": 2, "source": "agent", "observation": "agent_state_changed", "content": "", "extras": {}},
        {
            "id": 3,
            "source": "agent",
            "cause": 1,
            "observation": "run",
            "content": "a.py\n",
            "extras": {"command": "ls", "metadata": run_metadata},
        },  # fmt: skip
        {
            "id": 4,
            "source": "agent",
            "action": "read",
            "args": {"path": "/workspace/a.py", "view_range": [1, 1]},
        },
        {
            "id": 5,
            "source": "agent",
            "cause": 4,
            "observation": "read",
            "content": "Here's the result of running `cat -n` on /workspace/a.py:\n     1\tx = 1\n",
            "extras": {},
        },  # fmt: skip
        {"id": 6, "source": "agent", "action": "run", "args": {"command": "sleep 99"}},
    ]
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(e) + "\n" for e in plain))
    done = run_import("openhands", history, tmp_path / "plain")
    assert done.returncode == 0 and "imported 1 of 1 rows" in done.stdout, done.stdout + done.stderr
    (plain_run,) = read_trajectories(str(tmp_path / "plain"), validate=True)
    ls, read = plain_run.steps
    assert ls.action.text == "bash(command='ls')" and ls.observation.text == "a.py\n[exit status: 3]"
    assert ls.info == {"thought": "Look first.", "shell": {"cwd": "/workspace", "python": "/usr/bin/python"}}
    assert read.action.text == "read(path='/workspace/a.py', start_line=1, end_line=1)"
    assert read.observation.text == "     1\tx = 1\n"
    assert plain_run.task.metadata["unanswered_actions"] == [
        {"tool": "execute_bash", "arguments": {"command": "sleep 99"}}
    ]


def test_swe_play_rows_in_the_text_form(tmp_path: Path) -> None:
    found = _imported(_sample("adp_swe-play_oss_form_5rows.json"), tmp_path / "out", 5)
    assert {key: len(t.steps) for key, t in found.items()} == {
        "swe-play-0": 20,
        "swe-play-1": 20,
        "swe-play-2": 30,
        "swe-play-3": 19,
        "swe-play-4": 29,
    }
    first = found["swe-play-0"]
    # The task, not the in-context example fn_call_converter wrapped around it.
    assert first.task.instruction.startswith(
        "You are now given a project directory and required to finish the project task by task.\n"
        "You have finished all tasks before 1.2.1. Now it's your task to finish Task 1.2.1.\n\n"
        "<task_description>\nCreate a CPU class that combines registers, memory, and program counter "
        "into a unified state container."
    )
    assert first.task.instruction.endswith(
        "You MUST NOT modify any content under `/tests`.\nYou also do not need to proceed to next tasks."
    )
    assert "EXAMPLE" not in first.task.instruction
    assert first.initial_observation.text == "Repository at /workspace."
    assert (
        first.task.metadata["category"] == "general"
        and first.task.metadata["source"] == "cpu-architecture-simulator"
    )
    assert first.steps[0].action.text == "read(path='/workspace')"
    edit = first.steps[4]
    assert (
        edit.action.kind == "edit" and edit.action.arguments["path"] == "/workspace/src/cpu_simulator/cpu.py"
    )
    # Paths under /workspace (no <uploaded_files>) are relative in our diff, as our sandbox writes it.
    assert edit.observation.text.startswith(
        "--- a/src/cpu_simulator/cpu.py\n+++ b/src/cpu_simulator/cpu.py\n@@ -400,7 +400,9 @@\n"
    )
    bash = next(s for s in first.steps if s.action.kind == "bash")
    assert bash.action.text == "bash(command='cd /workspace && python test_cpu_implementation.py')"
    assert bash.observation.text.endswith(
        "CPU display functionality test passed!\n\nAll tests passed!\n[exit status: 0]"
    )
    # The final <function=finish> has no closing tag: its message is kept.
    assert first.task.metadata["final_message"].startswith(
        "Task 1.2.1 has been successfully completed! I have implemented the CPU class"
    )
    assert first.task.metadata["final_message"].endswith(
        "a solid foundation for building the complete CPU simulator."
    )
    assert first.task.metadata["task_completed"] == "true"
    assert {t.outcome.status for t in found.values()} == {"completed"}
    assert {t.outcome.reward for t in found.values()} == {None}  # SWE-Play records no test verdict
    # The think call before the finish is no step; said after the last step, it is kept apart.
    assert (
        found["swe-play-1"]
        .task.metadata["closing_thoughts"][0]
        .startswith("\nPerfect! All 288 tests are passing, including the 23 tests for Task 4.1.1")
    )
    # swe-play-4 ends in `<finish>...</finish>`, no function call in fn_call_converter's syntax: text.
    last = found["swe-play-4"].task.metadata
    assert "final_message" not in last and last["closing_thoughts"][0].startswith(
        "<finish>\n<parameter=message>Task 1.1.3"
    )


def test_swe_gym_sampled_rows_take_their_verdict(tmp_path: Path) -> None:
    found = _imported(_sample("adp_swe-gym_openhands_sampled_5rows.json"), tmp_path / "out", 5)
    assert {key: len(t.steps) for key, t in found.items()} == {
        "python__mypy-15976_0": 20,
        "Project-MONAI__MONAI-5686_4": 8,
        "Project-MONAI__MONAI-6849_1": 10,
        "getmoto__moto-6387_0": 16,
        "Project-MONAI__MONAI-3715_4": 28,
    }
    for run in found.values():  # every sampled row was resolved by SWE-Gym's tests
        assert run.outcome.reward == 1.0 and run.outcome.verification.details == {"resolved": True}
        assert run.outcome.verification.verifier == "imported:swe-gym-tests"
    moto = found["getmoto__moto-6387_0"]
    assert moto.initial_observation.text == "Repository getmoto/moto at /workspace/getmoto__moto__4.1."
    assert moto.policy.config["run_id"] == "gpt-4o-2024-08-06_maxiter_30_N_v2.1-no-hint-train-t04-run_1"
    run = moto.steps[6]
    assert run.action.text == "bash(command='python /workspace/getmoto__moto__4.1/reproduce_error.py')"
    assert run.observation.data["exit_status"] == 1 and run.observation.text.endswith("[exit status: 1]")
    assert run.info["shell"] == {"prompt": "root@openhands-workspace:/workspace/getmoto__moto__4.1 # "}
    assert moto.steps[5].observation.text.startswith(
        "--- /dev/null\n+++ b/reproduce_error.py\n@@ -0,0 +1,24 @@\n"
        "+import boto3\n+from moto import mock_cloudfront\n"
    )
    # finish() without a message: the text said with it is the final message.
    assert moto.task.metadata["final_message"].startswith(
        "The task has been successfully completed. Here's a summary of what was done:"
    )
    assert moto.task.metadata["closing_thoughts"][1].startswith("[user] Please continue working on the task")
    cut = found["Project-MONAI__MONAI-3715_4"].task.metadata  # the run ends on a call with no answer
    assert cut["unanswered_actions"] == [
        {
            "tool": "str_replace_editor",
            "arguments": {
                "command": "view",
                "path": "/workspace/Project-MONAI__MONAI__0.8/reproduce_error.py",
            },
        }
    ]

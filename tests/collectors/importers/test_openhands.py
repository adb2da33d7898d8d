"""OpenHands / SWE-Gym trajectories through the real CLI: Parquet files laid out as the Hub stores
SWE-Gym/OpenHands-Sampled-Trajectories (OpenAI tool calls) and SWE-Gym/OpenHands-SFT-Trajectories
(the `.oss` text form of the calls), converted to our swe tools, validated and written; a bad row
to the dead-letter file; a rerun resumes."""

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

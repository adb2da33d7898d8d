"""nebius/SWE-agent-trajectories rows through the real CLI: a Parquet file laid out as the Hub
stores the dataset (https://huggingface.co/datasets/nebius/SWE-agent-trajectories), read by
`datasets`, converted, validated and written; a bad row to the dead-letter file; a rerun resumes.
And the real rows ADP published from the dataset (read where they lie, ../shared/public-samples,
see its SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from schemas import read_trajectories
from tests.collectors.conftest import run_import

SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "public-samples"
NEBIUS_ROWS = SAMPLES / "swe_agent" / "adp_nebius_swe-agent-trajectories_5rows.json"

PROMPT = "\n\n(Open file: {file})\n(Current directory: /apispec)\nbash-$"
SYSTEM_PROMPT = "SETTING: You are an autonomous programmer ...\nCOMMANDS:\nopen:\n  signature: open <path>"
ISSUE = "We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\n"
WINDOW = (
    "[File: /apispec/apispec/core.py (120 lines total)]\n(9 more lines above)\n"
    "10:def path(self):\n11:    return {'summary': 1}\n12:\n(108 more lines below)"
)

MESSAGE = pa.struct(
    [
        ("cutoff_date", pa.string()),
        ("mask", pa.bool_()),
        ("role", pa.string()),
        ("system_prompt", pa.string()),
        ("text", pa.string()),
    ]
)
SCHEMA = pa.schema(
    [
        ("instance_id", pa.string()),
        ("model_name", pa.string()),
        ("target", pa.bool_()),
        ("trajectory", pa.list_(MESSAGE)),
        ("exit_status", pa.string()),
        ("generated_patch", pa.string()),
        ("eval_logs", pa.string()),
    ]
)


def _message(role: str, text: str | None, system_prompt: str | None = None) -> dict:
    return {
        "cutoff_date": "01.01.2023" if role == "system" else None,
        "mask": role == "ai",
        "role": role,
        "system_prompt": system_prompt,
        "text": text,
    }


def _row(number: int, target: bool, trajectory: list[dict]) -> dict:
    return {
        "instance_id": f"marshmallow-code__apispec-{number}",
        "model_name": "swe-agent-llama-70b",
        "target": target,
        "trajectory": trajectory,
        "exit_status": "submitted",
        "generated_patch": "diff --git a/apispec/core.py b/apispec/core.py\n",
        "eval_logs": "Will execute following command for run_tests ... PASSED tests/test_core.py",
    }


def write_sample(directory: Path) -> Path:
    """Two rows in the dataset's Parquet layout: a resolved run and an unresolved one."""
    state = PROMPT.format(file="n/a")
    opened = PROMPT.format(file="/apispec/apispec/core.py")
    good = [
        _message("system", None, SYSTEM_PROMPT),
        _message("user", ISSUE + "Add summary to paths\n\nINSTRUCTIONS: ..." + state),
        _message("ai", 'DISCUSSION\nLet\'s look for "paths".\n```\nsearch_dir "paths" apispec\n```'),
        _message(
            "user", 'Found 1 matches for "paths" in /apispec/apispec:\n/apispec/apispec/core.py' + state
        ),
        _message("ai", "Open it at line 11.\n```\nopen apispec/core.py 11\n```"),
        _message("user", WINDOW + opened),
        _message("ai", "Edit.\n```\nedit 11:11\n    return {'summary': 2}\nend_of_edit\n```"),
        _message("user", "File updated. Please review the changes." + opened),
        _message("ai", "Done.\n```\nsubmit\n```"),
    ]
    unresolved = [
        _message("system", None, SYSTEM_PROMPT),
        _message("user", ISSUE + "Crash on empty spec" + state),
        _message("ai", "I think I should just answer."),
        _message("user", "Your output was not formatted correctly." + state),
        _message("ai", "```\nls -F\n```"),
        _message("user", "AUTHORS.rst\napispec/" + state),
    ]
    rows = [_row(382, True, good), _row(383, False, unresolved)]
    path = directory / "swe_agent" / "data" / "train-00000-of-00001.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    return path.parent


def write_malformed(folder: Path) -> None:
    """A second Parquet file whose one row has a message of an unknown role (a dead letter)."""
    broken = [_message("user", ISSUE + "x" + PROMPT.format(file="n/a")), _message("robot", "beep")]
    table = pa.Table.from_pylist([_row(384, False, broken)], schema=SCHEMA)
    pq.write_table(table, folder / "malformed-00000-of-00001.parquet")


def test_rows_import_with_swe_tools_and_verdict(tmp_path: Path) -> None:
    source, out = write_sample(tmp_path), tmp_path / "out"
    write_malformed(source)
    done = run_import("swe_agent", source, out)
    assert done.returncode == 0, done.stderr
    assert "imported 2 of 3 rows" in done.stdout
    found = {t.task.id: t for t in read_trajectories(str(out), validate=True)}
    assert set(found) == {"marshmallow-code__apispec-382", "marshmallow-code__apispec-383"}

    solved = found["marshmallow-code__apispec-382"]
    assert solved.domain == "swe" and solved.environment.backend == "imported"
    assert [tool.name for tool in solved.environment.tools] == ["read", "edit", "bash"]
    assert solved.initial_observation.text == "Repository marshmallow-code/apispec at /apispec."
    assert solved.task.instruction.startswith(ISSUE) and "bash-$" not in solved.task.instruction
    assert solved.environment.config["agent_system_prompt"] == SYSTEM_PROMPT
    search, read, edit = solved.steps
    assert search.action.text == "bash(command='search_dir \"paths\" apispec')"
    assert (
        search.observation.text
        == 'Found 1 matches for "paths" in /apispec/apispec:\n/apispec/apispec/core.py'
    )
    assert search.info["thought"] == 'Let\'s look for "paths".'
    assert search.info["state"] == {"open_file": "n/a", "working_dir": "/apispec"}
    # The window command is our read of the lines the window showed, numbered as cat -n.
    assert read.action.text == "read(path='apispec/core.py', start_line=10, end_line=12)"
    assert read.observation.text == "    10\tdef path(self):\n    11\t    return {'summary': 1}\n    12\t\n"
    assert read.observation.format == "swe_tool_result"
    assert edit.action.kind == "bash" and edit.action.arguments["command"].startswith("edit 11:11\n")
    assert edit.observation.text == "File updated. Please review the changes."
    assert solved.task.metadata["unanswered_action"] == "submit"
    assert solved.policy.config == {"agent": "SWE-agent", "model": "swe-agent-llama-70b"}
    assert solved.outcome.reward == 1.0 and solved.outcome.verification.reward == 1.0
    assert solved.outcome.verification.verifier == "imported:swe-bench-tests"
    assert "PASSED" in solved.outcome.verification.output
    source_row = solved.provenance.source
    assert source_row.dataset == "nebius/SWE-agent-trajectories" and source_row.format == "swe_agent"
    assert source_row.license == "CC-BY-4.0" and source_row.row_id == "train-00000-of-00001.parquet#0"

    failed = found["marshmallow-code__apispec-383"]
    assert failed.outcome.reward == 0.0
    bad_reply, listing = failed.steps
    assert bad_reply.action.kind == "invalid"
    assert bad_reply.observation.text == "invalid action: the reply holds no fenced command"
    assert bad_reply.observation.data["recorded"] == "Your output was not formatted correctly."
    assert (
        listing.action.text == "bash(command='ls -F')" and listing.observation.text == "AUTHORS.rst\napispec/"
    )

    dead = [
        json.loads(line) for line in (out / "dead_letter" / "import-swe_agent.jsonl").read_text().splitlines()
    ]
    assert len(dead) == 1 and dead[0]["row_id"] == "malformed-00000-of-00001.parquet#0"
    assert "unknown role 'robot'" in dead[0]["reason"]

    again = run_import("swe_agent", source, out)
    assert again.returncode == 0, again.stderr
    assert (
        "imported 0 of 3 rows" in again.stdout
        and "already imported by an earlier run (skipped): 2" in again.stdout
    )
    assert len(list(read_trajectories(str(out)))) == 2


def test_published_rows_import_with_windows_as_reads(tmp_path: Path) -> None:
    assert NEBIUS_ROWS.is_file(), (
        f"{NEBIUS_ROWS} is missing: the public samples must sit beside the repository"
    )
    out = tmp_path / "out"
    done = run_import("swe_agent", NEBIUS_ROWS, out)
    assert done.returncode == 0, done.stderr
    assert "imported 5 of 5 rows" in done.stdout and "steps: 44" in done.stdout
    assert not (out / "dead_letter").exists()
    found = {
        t.provenance.source.row_id.rsplit("#", 1)[1]: t for t in read_trajectories(str(out), validate=True)
    }
    assert [len(found[str(i)].steps) for i in range(5)] == [5, 13, 4, 7, 15]
    assert all(
        t.outcome.reward == 1.0 and t.task.metadata["unanswered_action"] == "submit" for t in found.values()
    )

    plumbum = found["0"]
    assert plumbum.task.id == "tomerfiliba__plumbum-366_17"
    assert plumbum.initial_observation.text == "Repository tomerfiliba/plumbum at /plumbum."
    assert plumbum.policy.config == {"agent": "SWE-agent", "model": "swe-agent-llama-70b"}
    assert plumbum.environment.config["agent_system_prompt"].startswith("SETTING: You are an autonomous")
    listing, find, window, edit, check = plumbum.steps
    assert listing.action.text == "bash(command='ls -F')"
    assert listing.observation.text.splitlines()[:3] == ["CHANGELOG.rst", "CONTRIBUTING.rst", "LICENSE"]
    assert find.action.text == "bash(command='find_file \"image.py\" plumbum')"
    assert (
        find.observation.text
        == 'Found 1 matches for "image.py" in /plumbum/plumbum:\n/plumbum/plumbum/cli/image.py'
    )
    # `open path` is our read of the 99 lines the window showed, numbered as cat -n.
    assert window.action.text == "read(path='plumbum/cli/image.py', start_line=1, end_line=99)"
    assert window.observation.text.startswith(
        "     1\tfrom __future__ import print_function, division\n     2\t\n"
        "     3\tfrom plumbum import colors\n"
    )
    assert window.observation.text.endswith(
        "    98\tif __name__ == '__main__':\n    99\t    ShowImageApp()\n"
    )
    assert window.info["source_command"] == "open plumbum/cli/image.py"
    assert edit.action.text == "bash(command='edit 5:5\\nimport plumbum.cli as cli\\nend_of_edit')"
    assert check.observation.text == "Your command ran successfully and did not produce any output."
    assert "bash-$" not in check.observation.text and "(Open file" not in window.observation.text

    treon = found["4"]
    goto = treon.steps[3]
    assert goto.info["source_command"] == "goto 122"
    assert goto.action.text == "read(path='treon/treon.py', start_line=44, end_line=143)"
    assert goto.observation.text.startswith("    44\t        sys.exit(__doc__)\n")

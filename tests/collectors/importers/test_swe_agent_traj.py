"""SWE-agent `.traj` files through the real CLI: one 0.x run (command interface, state as JSON text)
and one 1.x run (str_replace_editor command lines, replay_config), laid out as SWE-agent writes
them (https://swe-agent.com/latest/usage/trajectories/); a file that is not JSON and one without
`trajectory` go to the dead-letter file; a rerun resumes."""

from __future__ import annotations

import json
from pathlib import Path

from schemas import read_trajectories
from tests.collectors.conftest import run_import

PROVENANCE = ("--dataset", "my-swe-agent-runs", "--license", "MIT")
PROMPT = "\n\n(Open file: {file})\n(Current directory: /marshmallow-code__marshmallow)\nbash-$"
ISSUE = (
    "We're currently solving the following issue within our repository. Here's the issue text:\nISSUE:\nfix\n"
)


def _step(action: str, observation: str, thought: str, state: dict | str) -> dict:
    return {
        "action": action,
        "observation": observation,
        "response": f"{thought}\n```\n{action}\n```",
        "thought": thought,
        "execution_time": 0.12,
        "state": state,
        "messages": [{"role": "system", "content": "..."}],
    }


def _v0_run() -> dict:
    state = json.dumps({"open_file": "n/a", "working_dir": "/marshmallow-code__marshmallow"})
    opened = json.dumps(
        {
            "open_file": "/marshmallow-code__marshmallow/src/fields.py",
            "working_dir": "/marshmallow-code__marshmallow",
        }
    )
    window = (
        "[File: /marshmallow-code__marshmallow/src/fields.py (1500 lines total)]\n"
        "(1473 more lines above)\n1474:        return value\n1475:\n(25 more lines below)"
    )
    return {
        "environment": "swe_main",
        "trajectory": [
            _step("ls -F\n", "AUTHORS.rst\nsrc/\n", "Let's look around.", state),
            _step("goto 1474", window, "The issue points at line 1474.", opened),
            _step("submit", "diff --git a/src/fields.py b/src/fields.py\n", "Done.", opened),
        ],
        "history": [
            {"role": "system", "content": "SETTING: You are an autonomous programmer", "agent": "primary"},
            {"role": "user", "content": "Here is a demonstration ...", "agent": "primary", "is_demo": True},
            {"role": "user", "content": ISSUE + PROMPT.format(file="n/a"), "agent": "primary"},
        ],
        "info": {
            "exit_status": "submitted",
            "submission": "diff --git a/src/fields.py b/src/fields.py\n",
            "model_stats": {
                "instance_cost": 0.4,
                "tokens_sent": 9000,
                "tokens_received": 300,
                "api_calls": 3,
            },
        },
    }


def _v1_run() -> dict:
    view = "str_replace_editor view /testbed/src/a.py  --view_range 1 2"
    create = "str_replace_editor create /testbed/repro.py --file_text 'import a\nprint(a.f())\n'"
    return {
        "trajectory": [
            _step(
                view,
                "Here's the result of running `cat -n` on /testbed/src/a.py:\n"
                "     1\tdef f():\n     2\t    return 1\n",
                "Read the function.",
                {"working_dir": "/testbed"},
            ),
            _step(
                create,
                "File created successfully at: /testbed/repro.py",
                "Reproduce.",
                {"working_dir": "/testbed"},
            ),
            _step("python repro.py", "1", "Run it.", {"working_dir": "/testbed"}),
        ],
        "history": [
            {"role": "system", "content": [{"type": "text", "text": "You are a helpful assistant"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<uploaded_files>\n/testbed\n</uploaded_files>\nFix f."}
                ],
                "message_type": "observation",
            },
        ],
        "info": {"exit_status": "submitted", "submission": "", "swe_agent_version": "1.1.0"},
        "replay_config": json.dumps({"agent": {"model": {"name": "claude-3-7-sonnet-20250219"}}}),
    }


def write_sample(directory: Path) -> Path:
    """A run folder as SWE-agent lays it out (`<run>/<instance_id>/<instance_id>.traj`): a 0.x run
    and a 1.x run."""
    root = directory / "swe_agent_traj" / "trajectories"
    files = {
        "marshmallow-code__marshmallow-1359": json.dumps(_v0_run(), indent=2),
        "pydata__xarray-4094": json.dumps(_v1_run()),
    }
    _write(root, files)
    return root


def write_malformed(root: Path) -> None:
    """A file that is not JSON and one without `trajectory`."""
    files = {
        "django__django-11099": '{"trajectory": [',
        "sympy__sympy-20590": json.dumps({"history": [], "info": {}}),
    }
    _write(root, files)


def _write(root: Path, files: dict[str, str]) -> None:
    for instance, text in files.items():
        path = root / instance / f"{instance}.traj"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_traj_files_import_as_swe_tools(tmp_path: Path) -> None:
    source, out = write_sample(tmp_path), tmp_path / "out"
    write_malformed(source)
    done = run_import("swe_agent_traj", source, out, *PROVENANCE)
    assert done.returncode == 0, done.stderr
    assert "imported 2 of 4 rows" in done.stdout
    found = {t.task.id: t for t in read_trajectories(str(out), validate=True)}
    assert set(found) == {"marshmallow-code__marshmallow-1359", "pydata__xarray-4094"}

    old = found["marshmallow-code__marshmallow-1359"]
    assert old.task.instruction == ISSUE.rstrip(
        "\n"
    )  # the demonstration is not the task; the prompt suffix went
    assert (
        old.initial_observation.text
        == "Repository marshmallow-code/marshmallow at /marshmallow-code__marshmallow."
    )
    listing, window, submit = old.steps
    assert (
        listing.action.text == "bash(command='ls -F')" and listing.observation.text == "AUTHORS.rst\nsrc/\n"
    )
    assert listing.info["state"]["working_dir"] == "/marshmallow-code__marshmallow"
    assert window.action.text == "read(path='src/fields.py', start_line=1474, end_line=1475)"
    assert window.observation.text == "  1474\t        return value\n  1475\t\n"
    assert window.info["thought"] == "The issue points at line 1474."
    assert submit.action.text == "bash(command='submit')"
    assert old.task.metadata["exit_status"] == "submitted"
    assert old.task.metadata["model_stats"]["api_calls"] == 3
    assert old.outcome.status == "completed" and old.outcome.reward is None
    assert old.environment.config["agent_system_prompt"] == "SETTING: You are an autonomous programmer"
    assert (
        old.provenance.source.row_id
        == "marshmallow-code__marshmallow-1359/marshmallow-code__marshmallow-1359.traj"
    )
    assert old.provenance.source.dataset == "my-swe-agent-runs" and old.provenance.source.license == "MIT"

    new = found["pydata__xarray-4094"]
    assert new.task.instruction == "<uploaded_files>\n/testbed\n</uploaded_files>\nFix f."
    assert new.policy.config["model"] == "claude-3-7-sonnet-20250219"
    assert new.environment.config["agent_version"] == "1.1.0"
    view, create, run = new.steps
    assert view.action.text == "read(path='/testbed/src/a.py', start_line=1, end_line=2)"
    assert view.observation.text == "     1\tdef f():\n     2\t    return 1\n"
    assert create.action.arguments == {
        "command": "create",
        "path": "/testbed/repro.py",
        "file_text": "import a\nprint(a.f())\n",
    }
    assert (
        create.observation.text
        == "--- /dev/null\n+++ b/repro.py\n@@ -0,0 +1,2 @@\n+import a\n+print(a.f())\n"
    )
    assert run.action.text == "bash(command='python repro.py')" and run.observation.text == "1"

    dead = {
        json.loads(line)["row_id"]: json.loads(line)
        for line in (out / "dead_letter" / "import-swe_agent_traj.jsonl").read_text().splitlines()
    }
    assert set(dead) == {
        "django__django-11099/django__django-11099.traj",
        "sympy__sympy-20590/sympy__sympy-20590.traj",
    }
    assert "not JSON" in dead["django__django-11099/django__django-11099.traj"]["reason"]
    assert "missing field 'trajectory'" in dead["sympy__sympy-20590/sympy__sympy-20590.traj"]["reason"]

    again = run_import("swe_agent_traj", source, out, *PROVENANCE)
    assert again.returncode == 0, again.stderr
    assert "imported 0 of 4 rows" in again.stdout and "(skipped): 2" in again.stdout
    assert len(list(read_trajectories(str(out)))) == 2

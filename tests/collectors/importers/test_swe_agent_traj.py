"""SWE-agent `.traj` files through the real CLI: one 0.x run (command interface, state as JSON text)
and one 1.x run (str_replace_editor command lines, replay_config), laid out as SWE-agent writes
them (https://swe-agent.com/latest/usage/trajectories/); a file that is not JSON and one without
`trajectory` go to the dead-letter file; a rerun resumes. And three real `.traj` files from SWE-agent's
repository, 0.x and 1.x (read where they lie, ../shared/public-samples, see its SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collectors.importers.swe_common import swe_agent_turn
from schemas import read_trajectories
from tests.collectors.conftest import run_import

SAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "public-samples"
TRAJ_FILES = SAMPLES / "swe_agent_traj"

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


def test_published_traj_files_import_with_their_windows_as_reads(tmp_path: Path) -> None:
    assert TRAJ_FILES.is_dir(), f"{TRAJ_FILES} is missing: the public samples must sit beside the repository"
    out = tmp_path / "out"
    done = run_import("swe_agent_traj", TRAJ_FILES, out)
    assert done.returncode == 0, done.stderr
    assert "imported 3 of 3 rows" in done.stdout and "steps: 44" in done.stdout
    assert not (out / "dead_letter").exists()
    found = {t.provenance.source.row_id: t for t in read_trajectories(str(out), validate=True)}
    assert all(t.outcome.status == "completed" and t.outcome.reward is None for t in found.values())

    # 1.x: a quoted path, CRLF line ends (the terminal's), the instance named by replay_config.
    replace = found["marshmallow-1867__function_calling_replace.traj"]
    assert len(replace.steps) == 11
    assert replace.task.id == "marshmallow-code__marshmallow-1867"
    assert replace.initial_observation.text == "Repository marshmallow-code/marshmallow at /testbed."
    assert replace.policy.config == {"agent": "SWE-agent", "model": "gpt-4o"}
    opened = replace.steps[5]
    assert opened.info["source_command"] == 'open "src/marshmallow/fields.py" 1474'
    assert opened.action.text == "read(path='src/marshmallow/fields.py', start_line=1457, end_line=1556)"
    assert opened.observation.text.startswith(
        "  1457\t            self.MINUTES,\n  1458\t            self.HOURS,\n"
    )
    assert opened.observation.text.endswith(
        "  1555\t        if value is None:\n  1556\t            return None\n"
    )
    assert replace.steps[3].observation.text == (
        "AUTHORS.rst\t    LICENSE\t RELEASING.md\t      performance/    setup.py\n"
        "CHANGELOG.rst\t    MANIFEST.in  azure-pipelines.yml  pyproject.toml  src/\n"
        "CODE_OF_CONDUCT.md  NOTICE\t docs/\t\t      reproduce.py    tests/\n"
        "CONTRIBUTING.rst    README.rst\t examples/\t      setup.cfg       tox.ini"
    )
    assert not any("\r\n" in step.observation.text for step in replace.steps)
    assert replace.steps[-1].action.text == "bash(command='submit')"
    assert replace.steps[-1].observation.text.startswith("\ndiff --git a/src/marshmallow/fields.py")

    # 0.x: state as JSON text, a demonstration in the history, `edit N:M` left as bash.
    pydicom = found["pydicom-1458__gpt4_default.traj"]
    assert len(pydicom.steps) == 12
    assert pydicom.initial_observation.text == "Repository pydicom-1458__gpt4_default at /pydicom__pydicom."
    assert pydicom.task.instruction.startswith(
        "We're currently solving the following issue within our repository."
    )
    window = pydicom.steps[4]
    assert window.action.text == (
        "read(path='pydicom/pixel_data_handlers/numpy_handler.py', start_line=273, end_line=372)"
    )
    assert window.observation.text.endswith('   372\t    return cast("np.ndarray", arr)\n')
    assert pydicom.steps[5].action.arguments["command"].startswith("edit 287:295\n")
    assert pydicom.task.metadata["model_stats"]["api_calls"] == 12

    # 0.x EnIGMA: the runtime's PROCESS-DONE marker is not the program's output.
    ctf = found["ctf_web_i_got_id_demo.traj"]
    assert len(ctf.steps) == 21
    hello = ctf.steps[1]
    assert hello.action.text == "bash(command='curl http://web.chal.csaw.io:8000/cgi-bin/hello.pl')"
    assert hello.observation.text.endswith("--:--:-- --:--:-- --:--:--   268\nHello World from Perl!")
    assert hello.info["exit_code"] == 0
    assert not any("PROCESS-DONE" in step.observation.text for step in ctf.steps)
    assert ctf.steps[-1].action.text == "bash(command='submit FLAG{p3rl_6_iz_EVEN_BETTER!!1}')"
    assert ctf.steps[-1].observation.text == "\nFLAG{p3rl_6_iz_EVEN_BETTER!!1}\n"


@pytest.mark.parametrize("command", ['open "lib/util.py" 3', "open lib/util.py 3", "open 'lib/util.py' 3"])
def test_open_reads_the_window_quoted_or_not_from_the_working_directory(command: str) -> None:
    window = (
        "[File: lib/util.py (9 lines total)]\r\n(1 more lines above)\r\n2:a = 1\r\n3:b = 2\r\n"
        "(6 more lines below)"
    )
    state = {"open_file": "/repo/src/lib/util.py", "working_dir": "/repo/src"}
    turn = swe_agent_turn(command, window, "/repo", state)
    assert turn.action.text == "read(path='src/lib/util.py', start_line=2, end_line=3)"
    assert turn.observation.text == "     2\ta = 1\n     3\tb = 2\n"

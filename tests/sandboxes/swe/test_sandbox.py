"""The SWE sandbox in a real workspace: a git repository with a small pure-Python package and its
pytest tests, written by the test, bash under real bwrap (and docker, and local on request)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandboxes.base import InvalidActionError, SandboxClosedError, SandboxCrashedError
from sandboxes.checks import check_sandbox, resource_exists
from sandboxes.domains import domain_spec
from sandboxes.swe import HOOKS, SweConfig, SweSandbox, bash_action, edit_action, make_config, read_action
from schemas.records import Action, Task
from tests.sandboxes.swe.git_checks import write_repository

OPS = """def add(a, b):
    return a + b


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
"""
TESTS = """from mathx.ops import add, clamp


def test_add():
    assert add(2, 3) == 5


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-1, 0, 3) == 0
"""
TEST_COMMAND = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("bwrap") is None:
        pytest.fail("bwrap is not installed (apt-get install bubblewrap)")
    files = {"mathx/__init__.py": "", "mathx/ops.py": OPS, "tests/test_ops.py": TESTS}
    return write_repository(tmp_path_factory.mktemp("swe") / "mathx", files, "mathx 1.0")


def _task(template: Path, task_id: str = "mathx-0") -> Task:
    metadata = {"template": str(template), "repo": "mathx", "version": "1.0", "test_command": TEST_COMMAND}
    return Task(id=task_id, instruction="Make the tests pass.", metadata=metadata)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SweSandbox]:
    made = SweSandbox(make_config("bwrap"))
    made.start()
    yield made
    held = made.resources()
    made.close()
    assert not [r for r in held if resource_exists(r)]


@pytest.fixture
def fresh(sandbox: SweSandbox, template: Path) -> SweSandbox:
    sandbox.reset(_task(template))
    return sandbox


def text_of(sandbox: SweSandbox, action: Action) -> str:
    return sandbox.step(action).observation.text


def test_reset_shows_the_repository_and_records_the_tools(sandbox: SweSandbox, template: Path) -> None:
    obs = sandbox.reset(_task(template))
    assert obs.format == "swe_tool_result"
    assert obs.text == (
        "Repository mathx 1.0 at /repo. Run the tests with: python -m pytest -q -p no:cacheprovider\n\n"
        ".git/\nmathx/\ntests/\n"
    )
    env = sandbox.describe()
    assert (env.name, env.backend) == ("swe", "bwrap")
    assert [t.name for t in env.tools] == ["read", "edit", "bash"]
    assert env.tools[1].input_schema["properties"]["command"]["enum"] == ["str_replace", "create", "insert"]
    assert env.config["task_metadata"]["template"] == str(template)
    assert domain_spec("swe").hooks is HOOKS


def test_an_edit_within_the_second_of_the_last_run_is_what_the_next_run_imports(fresh: SweSandbox) -> None:
    # CI once saw pytest pass on `a - b`: same size, same mtime second, so Python kept the .pyc.
    # Setting the old mtime back makes that race certain.
    assert "2 passed" in text_of(fresh, bash_action("python -m pytest -q -p no:cacheprovider"))
    mtime = text_of(fresh, bash_action("stat -c %Y mathx/ops.py")).split("\n")[0]
    fresh.step(edit_action("str_replace", "mathx/ops.py", old_str="a + b", new_str="a - b"))
    text_of(fresh, bash_action(f"touch -d @{mtime} mathx/ops.py"))
    assert "1 failed, 1 passed" in text_of(fresh, bash_action("python -m pytest -q -p no:cacheprovider"))


def test_every_tool_and_a_full_fix_cycle(fresh: SweSandbox, template: Path) -> None:
    assert (
        text_of(fresh, read_action("mathx/ops.py", 1, 2))
        == "     1\tdef add(a, b):\n     2\t    return a + b\n"
    )
    assert text_of(fresh, read_action("/repo/tests")) == "test_ops.py\n"
    passing = fresh.step(bash_action("python -m pytest -q -p no:cacheprovider")).observation
    assert "2 passed" in passing.text and passing.text.endswith("\n[exit status: 0]")
    assert passing.data == {
        "tool": "bash",
        "exit_status": 0,
        "timed_out": False,
        "truncated": False,
        "error": "",
    }
    broken = fresh.step(
        edit_action("str_replace", "mathx/ops.py", old_str="a + b", new_str="a - b")
    ).observation
    assert broken.text == (
        "--- a/mathx/ops.py\n+++ b/mathx/ops.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a + b\n"
        "+    return a - b\n \n \n def clamp(x, lo, hi):\n"
    )
    assert broken.data["diff"] == broken.text and broken.data["error"] == ""
    failing = fresh.step(bash_action("python -m pytest -q -p no:cacheprovider")).observation
    assert "1 failed, 1 passed" in failing.text and "assert -1 == 5" in failing.text
    assert failing.data["exit_status"] == 1 and failing.text.endswith("[exit status: 1]")
    assert "M mathx/ops.py" in text_of(fresh, bash_action("git status --short"))
    fresh.step(edit_action("insert", "mathx/ops.py", insert_line=0, new_str='"""Small maths."""'))
    fresh.step(edit_action("str_replace", "mathx/ops.py", old_str="a - b", new_str="a + b"))
    assert "2 passed" in text_of(fresh, bash_action("python -m pytest -q -p no:cacheprovider"))
    created = fresh.step(edit_action("create", "mathx/extra.py", file_text="from mathx.ops import add\n"))
    assert created.observation.text.startswith("--- /dev/null\n+++ b/mathx/extra.py\n")
    shown = text_of(
        fresh, bash_action("python -c 'import mathx.extra; print(mathx.extra.add(1, 1))'; ls -l mathx")
    )
    assert shown.startswith("2\n") and " agent agent " in shown
    assert (template / "mathx" / "ops.py").read_text() == OPS, "the template must never change"


def test_non_unique_str_replace_leaves_the_file_alone(fresh: SweSandbox) -> None:
    obs = fresh.step(edit_action("str_replace", "mathx/ops.py", old_str="return hh", new_str="x")).observation
    assert obs.text == obs.data["error"] == "Error: old_str not found in mathx/ops.py"
    obs = fresh.step(
        edit_action("str_replace", "mathx/ops.py", old_str="        return", new_str="pass")
    ).observation
    assert obs.text == "Error: old_str found 2 times in mathx/ops.py (must be unique)"
    assert obs.data["diff"] == ""
    assert Path(fresh.workspace or "", "mathx/ops.py").read_text() == OPS


def test_an_edit_that_breaks_syntax_shows_in_the_test_run(fresh: SweSandbox) -> None:
    fresh.step(edit_action("str_replace", "mathx/ops.py", old_str="def add(a, b):", new_str="def add(a, b)"))
    out = text_of(fresh, bash_action("python -m pytest -q -p no:cacheprovider"))
    assert "SyntaxError" in out and "mathx/ops.py" in out
    assert out.endswith("[exit status: 2]")


def _host_processes_with(needle: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if needle.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_a_test_run_that_times_out_is_killed_whole(fresh: SweSandbox) -> None:
    slow = "import subprocess, time\n\n\ndef test_slow():\n"
    slow += "    subprocess.Popen(['sleep', '9771'])\n    time.sleep(9772)\n"
    fresh.step(edit_action("create", "tests/test_slow.py", file_text=slow))
    t0 = time.monotonic()
    obs = fresh.step(bash_action("python -m pytest -q -p no:cacheprovider tests/test_slow.py", timeout_s=2))
    assert time.monotonic() - t0 < 8
    assert obs.observation.text.endswith("[timed out after 2 s]")
    assert obs.observation.data["timed_out"] and obs.observation.data["exit_status"] is None
    # The kernel tears the sandbox's pid namespace down after its init dies: quick, but not instant on a
    # loaded host (0.3 s was once too short in a full suite). A survivor would stay for hours.
    deadline = time.monotonic() + 5
    while _host_processes_with("977") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _host_processes_with("977") == [], "a process of the timed-out test run survived"
    assert text_of(fresh, bash_action("echo next")) == "next\n[exit status: 0]"


def test_paths_leading_out_of_the_workspace_are_refused(fresh: SweSandbox) -> None:
    fresh.step(bash_action("ln -s /etc/hostname leak && ln -s / root && ln -s /tmp/swe-planted.txt plant"))
    for path in ("leak", "root/etc/passwd", "../../../etc/passwd", "/etc/passwd", "mathx/../../x"):
        obs = fresh.step(read_action(path)).observation
        assert obs.text == f"Error: {path} is outside the repository", path
    obs = fresh.step(edit_action("create", "plant", file_text="planted")).observation
    assert obs.text == "Error: plant is outside the repository"
    assert not os.path.exists("/tmp/swe-planted.txt")


def test_no_network_inside_bash(fresh: SweSandbox) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        obs = fresh.step(bash_action(f'python -c "{probe}"')).observation
    assert "ConnectionRefusedError" in obs.text and obs.data["exit_status"] == 1
    interfaces = text_of(fresh, bash_action("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"))
    assert interfaces == "lo\n[exit status: 0]"


def test_memory_is_bounded(fresh: SweSandbox) -> None:
    obs = fresh.step(bash_action("python -c 'x = bytearray(3 * 1024 ** 3); print(len(x))'")).observation
    assert obs.data["exit_status"] not in (0, None), obs.text
    assert "MemoryError" in obs.text or obs.data["exit_status"] == 137
    assert text_of(fresh, bash_action("echo alive")) == "alive\n[exit status: 0]"


def test_long_output_is_cut_with_an_explicit_marker(sandbox: SweSandbox, template: Path) -> None:
    small = SweSandbox(SweConfig(backend=sandbox.config.backend, max_output_bytes=1000))
    with small:
        small.reset(_task(template))
        obs = small.step(bash_action("python -c \"print('x' * 20000)\"; echo tail-line")).observation
        assert obs.data["truncated"] and obs.text.endswith("tail-line\n[exit status: 0]")
        assert "\n[... 19011 of 20011 bytes truncated ...]\n" in obs.text  # 20,001 x's and tail-line
        small.step(bash_action("seq 1 5000 > numbers.txt"))
        read = small.step(read_action("numbers.txt")).observation
        left = len("".join(f"{n}\n" for n in range(101, 5001)))
        total = len("".join(f"{n}\n" for n in range(1, 5001)))
        assert read.data["truncated"] and read.text.startswith("     1\t1\n")
        assert read.text.endswith(
            f"   100\t100\n[... {left} of {total} bytes truncated; continue with start_line=101 ...]\n"
        )
        last = small.step(read_action("numbers.txt", start_line=4999)).observation
        assert last.text == "  4999\t4999\n  5000\t5000\n" and not last.data["truncated"]


def test_invalid_actions_raise_and_change_nothing(fresh: SweSandbox) -> None:
    with pytest.raises(InvalidActionError, match="unknown SWE tool"):
        fresh.step(Action(kind="write", arguments={"path": "a"}))
    with pytest.raises(InvalidActionError, match="old_str"):
        fresh.step(Action(kind="edit", arguments={"command": "str_replace", "path": "mathx/ops.py"}))
    assert Path(fresh.workspace or "", "mathx/ops.py").read_text() == OPS


def test_a_vanished_workspace_or_dead_backend_is_a_crash(sandbox: SweSandbox, template: Path) -> None:
    sandbox.reset(_task(template))
    shutil.rmtree(sandbox.workspace or "")
    assert not sandbox.alive
    with pytest.raises(SandboxCrashedError, match="vanished"):
        sandbox.step(read_action("mathx/ops.py"))
    sandbox.reset(_task(template))
    home = next(r[5:] for r in sandbox.resources() if r.startswith("path:") and "/sys/" not in r)
    shutil.rmtree(os.path.join(home, "home"))  # bwrap can no longer set the sandbox up
    with pytest.raises(SandboxCrashedError, match="bwrap could not start"):
        sandbox.step(bash_action("true"))
    sandbox.reset(_task(template))
    assert text_of(sandbox, bash_action("echo fine")) == "fine\n[exit status: 0]"


def test_check_sandbox(template: Path) -> None:
    actions = [
        read_action("."),
        edit_action("str_replace", "mathx/ops.py", old_str="a + b", new_str="b + a"),
        bash_action("python -m pytest -q -p no:cacheprovider"),
        read_action("missing.py"),
    ]
    check_sandbox(SweSandbox(make_config("bwrap")), _task(template), actions)
    closed = SweSandbox(make_config("bwrap"))
    closed.close()
    with pytest.raises(SandboxClosedError):
        closed.reset(_task(template))


def test_replay_sandbox_from_a_local_recording_runs_under_bwrap(template: Path) -> None:
    with SweSandbox(make_config("local")) as local:
        first = local.reset(_task(template))
        assert first.text.startswith(f"Repository mathx 1.0 at {local.workspace}.")
        assert text_of(local, bash_action("pwd")) == f"{local.workspace}\n[exit status: 0]"
        environment = local.describe()
    replay = HOOKS.replay_sandbox(environment)
    assert replay.config.backend.kind == "bwrap"
    with replay:
        again = replay.reset(_task(template))
        assert again.text.startswith("Repository mathx 1.0 at /repo.")
        assert "2 passed" in text_of(replay, bash_action("python -m pytest -q -p no:cacheprovider"))


@pytest.mark.docker
def test_docker_backend(terminal_image: str, template: Path) -> None:
    with SweSandbox(make_config("docker", image=terminal_image)) as box:
        box.reset(_task(template))
        container = next(r for r in box.resources() if r.startswith("container:"))
        box.step(edit_action("str_replace", "mathx/ops.py", old_str="a + b", new_str="a * b"))
        probe = "from mathx.ops import add; print(add(2, 3))"
        assert (
            text_of(box, bash_action(f'python3 -c "{probe}"; id -un; pwd'))
            == "6\nagent\n/repo\n[exit status: 0]"
        )
        obs = box.step(bash_action("(sleep 9773 &); sleep 9774", timeout_s=1)).observation
        assert obs.data["timed_out"] and obs.text == "[timed out after 1 s]"
        assert text_of(box, bash_action("ps -eo args | grep -c '[s]leep 977'")) == "0\n[exit status: 1]"
        assert text_of(box, bash_action("(sleep 9775 &); echo left")) == "left\n[exit status: 0]"
        assert text_of(box, bash_action("ps -eo args | grep -c '[s]leep 977'")) == "0\n[exit status: 1]"
        net = text_of(
            box, bash_action("python3 -c \"import socket; socket.create_connection(('10.0.0.1', 80), 2)\"")
        )
        assert "Network is unreachable" in net
        subprocess.run(["docker", "kill", container.split(":", 1)[1]], capture_output=True, timeout=60)
        with pytest.raises(SandboxCrashedError, match="container"):
            box.step(bash_action("true"))
        assert not box.alive
        box.reset(_task(template))
        assert text_of(box, bash_action("echo again")) == "again\n[exit status: 0]"
    assert not resource_exists(container)


def test_a_program_that_exits_without_closing_leaves_nothing(template: Path) -> None:
    program = (
        "import json\nfrom sandboxes.swe import SweSandbox, make_config\nfrom schemas.records import Task\n"
        "sb = SweSandbox(make_config('bwrap'))\nsb.start()\n"
        f"sb.reset(Task(id='x', metadata={{'template': {str(template)!r}}}))\n"
        "print(json.dumps(sb.resources()))\n"
    )
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    held = json.loads(ran.stdout)
    assert held and not [r for r in held if resource_exists(r)]

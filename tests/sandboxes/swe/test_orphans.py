"""The SWE sandbox on the local backend leaves no process behind: `setsid sleep` and a double fork
are gone when their command times out, when it exits, and at close(); with a cgroup box and with
the subreaper launcher (forced by declaring cgroups unusable)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sandboxes import containment
from sandboxes.checks import process_exists, resource_exists
from sandboxes.swe import SweSandbox, bash_action, make_config
from schemas.records import Task
from tests.sandboxes.test_containment import orphan_maker, survivors, until_written, wait_for_pids


@pytest.fixture(params=["cgroup", "subreaper"])
def local_sandbox(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> SweSandbox:
    if request.param == "subreaper":
        monkeypatch.setattr(containment, "cgroups_unusable", lambda: "forced by the test")
    elif containment.cgroups_unusable() is not None:
        pytest.fail(f"cgroup boxes need root and cgroup v2: {containment.cgroups_unusable()}")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("orphans\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    sandbox = SweSandbox(make_config("local"))
    sandbox.start()
    sandbox.reset(Task(id="orphans", instruction="", metadata={"template": str(repo)}))
    return sandbox


def test_a_timed_out_command_leaves_nothing(local_sandbox: SweSandbox, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with local_sandbox:
        obs = local_sandbox.step(
            bash_action(orphan_maker(pids) + "echo $$ >> " + str(pids) + "; sleep 30", 2)
        )
        assert obs.observation.data["timed_out"] is True
        started = wait_for_pids(pids, 3)
        assert not survivors(started, within=1.0), "left running after the timeout"


def test_an_exited_command_leaves_nothing_and_close_is_clean(
    local_sandbox: SweSandbox, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    held = local_sandbox.resources()
    command = orphan_maker(pids) + until_written(pids, 2) + "echo started"
    obs = local_sandbox.step(bash_action(command)).observation
    assert obs.data["exit_status"] == 0 and obs.text.startswith("started\n")
    started = wait_for_pids(pids, 2)
    assert not survivors(started, within=1.0), "left running after the command exited"
    local_sandbox.close()
    assert not [pid for pid in started if process_exists(pid)]
    assert not [r for r in held if resource_exists(r)], "the box (cgroup, watchdog) outlived close()"

"""Rewards an agent cannot forge, on a real Harbor task in HarborSandbox (real docker, real test.sh).

The task's test.sh always writes reward 0. The agent is root in its container, as Harbor tasks
usually have it, and tries to turn that 0 into a 1: by replacing `timeout` (which the verifier used
to run test.sh under) or `bash` with a script that writes reward 1, or by leaving a double-forked
daemon that keeps rewriting /tests/test.sh and the reward file while the verifier runs. Each still
gets 0, with test.sh's own output: its processes are gone before the check, and the check's shell
and time bound are not the container's.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from collectors.terminal.harbor import harbor_spec
from sandboxes.harbor import build_image, load_tasks, task_folders
from sandboxes.harbor.verifier import EXEC_GRACE_S
from sandboxes.terminal import parse_action
from tests.sandboxes.harbor.folders import write_task
from tests.sandboxes.harbor.plays import harbor_sandboxes, play_specs, run_plays

pytestmark = [pytest.mark.docker, pytest.mark.tmux]

# Says who runs it and how /tests looks, then writes 0 whatever the agent did.
ALWAYS_ZERO = """#!/bin/bash
mkdir -p /logs/verifier
echo "test.sh ran as $(id -un); tests: $(stat -c '%U %A' /tests/test.sh)"
echo 0 > /logs/verifier/reward.txt
"""
FORGER = "#!/bin/sh\\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; exit 0\\n"
# Written over a program by rename: the running shell's own binary cannot be written in place.
REPLACE = (
    "printf '"
    + FORGER
    + "' > /tmp/forger && chmod 755 /tmp/forger && cp /tmp/forger {path}.new && mv -f {path}.new {path}"
)
FAKE_TEST = "#!/bin/bash\\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\\n"
# Double-forked (the subshell exits at once), in its own session, detached from the pane.
DAEMON = (
    "( setsid nohup bash -c 'while :; do [ -d /tests ] && printf \"" + FAKE_TEST + '" > /tests/test.sh;'
    " [ -d /logs/verifier ] && echo 1 > /logs/verifier/reward.txt; sleep 0.005; done'"
    " >/dev/null 2>&1 </dev/null & ) ; sleep 0.3; pgrep -f 'while :' >/dev/null && echo daemon running"
)


def test_forged_rewards_get_zero(tmp_path: Path, terminal_image: str) -> None:
    write_task(tmp_path / "tasks", "always-zero", test_sh=ALWAYS_ZERO, solve_sh="#!/bin/bash\ntrue\n")
    [task], _ = load_tasks(task_folders(tmp_path / "tasks"))
    image = build_image(task, map_base_images=True)
    plays = {
        "fake-timeout": [{"command": REPLACE.format(path="/usr/bin/timeout")}],
        "fake-bash": [{"command": REPLACE.format(path="/usr/bin/bash")}],
        "daemon": [{"command": DAEMON}],
        "daemon-test-as-nobody": [{"command": DAEMON}],
        "nothing": [{"command": "true"}],
    }
    specs = play_specs(task, image, plays)
    for spec in specs:
        if spec.id.endswith("as-nobody"):
            spec.task.verifier["user"] = "nobody"  # test.sh as another user: two docker execs
    summary, found = run_plays(task, image, specs, tmp_path / "out", max_steps=2)
    assert summary.exit_code == 0
    assert set(found) == set(plays)
    # The forgeries were in place when the episode ended.
    assert "daemon running" in found["daemon"].steps[0].observation.text
    assert found["fake-timeout"].steps[0].observation.data["exit_code"] == 0
    for label, trajectory in found.items():
        verification = trajectory.outcome.verification
        assert verification is not None and verification.error == "", (label, verification)
        assert trajectory.outcome.reward == 0.0, (label, verification.output)
        user = "nobody" if label.endswith("as-nobody") else "root"
        # test.sh itself ran, from the task's tests/: root-owned and writable by root alone.
        assert f"test.sh ran as {user}; tests: root -rw-r--r--" in verification.output, (
            label,
            verification.output,
        )
        assert verification.details["reward_file"] == "reward.txt"
    # The sandboxes were reused, not replaced: ending the agent's processes is not a crash.
    assert summary.sandbox_replacements == 0


def test_a_test_sh_past_its_timeout_is_stopped_from_the_host(tmp_path: Path, terminal_image: str) -> None:
    """No `timeout` of the container's bounds test.sh: the host does, and kills the container."""
    slow = (
        "#!/bin/bash\necho started\nsleep 60\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n"
    )
    write_task(tmp_path / "tasks", "slow-test", test_sh=slow, verifier_timeout=2)
    [task], _ = load_tasks(task_folders(tmp_path / "tasks"))
    image = build_image(task, map_base_images=True)
    spec = harbor_spec(task, image, oracle=False, with_solution=False)
    sandbox = harbor_sandboxes(task, image)()
    try:
        sandbox.reset(spec.task)
        sandbox.step(parse_action("command", {"command": "true"}))
        clock = time.monotonic()
        verification = sandbox.verify(spec.task, [])
        elapsed = time.monotonic() - clock
        assert verification is not None and verification.reward is None
        assert verification.error == "test.sh timed out after 2 s" and "started" in verification.output
        assert elapsed < 2 + EXEC_GRACE_S + 10, elapsed
        [container] = [r.split(":", 1)[1] for r in sandbox.resources() if r.startswith("container:")][:1]
        running = ["docker", "inspect", "-f", "{{.State.Running}}", container]
        state = subprocess.run(running, capture_output=True, text=True)
        assert state.stdout.strip() == "false", state  # nothing of test.sh runs on
        assert sandbox.alive  # the episode is over, the sandbox is fine
    finally:
        sandbox.close()

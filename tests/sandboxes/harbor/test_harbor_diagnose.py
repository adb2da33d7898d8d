"""A failed Harbor verifier's cause in one line: the commands of test.sh that found no network, found
by the tools' own messages (as curl, apt, pip and uv print them in agentworld/terminal-bench with
`--network none`) and matched back to test.sh's lines."""

from __future__ import annotations

from dataclasses import asdict

from sandboxes.harbor.diagnose import failure_cause, no_network
from tests.sandboxes.harbor.folders import TB_MISSING_TEST, UV_INSTALLER

APT_SCRIPT = """#!/bin/bash
set -e
apt-get update
apt-get install -y nginx
pip3 install --break-system-packages flask==3.1.0
"""
# What those commands print offline, interleaved with other output.
APT_OUTPUT = """Ign:1 http://deb.debian.org/debian trixie InRelease
Err:1 http://deb.debian.org/debian trixie InRelease
  Temporary failure resolving 'deb.debian.org'
Reading package lists...
W: Some index files failed to download. They have been ignored, or old ones used instead.
Building dependency tree...
E: Unable to locate package nginx
Looking in links: /opt/agentworld/wheels
ERROR: Could not find a version that satisfies the requirement flask==3.1.0 (from versions: none)
ERROR: No matching distribution found for flask==3.1.0
"""
UV_OUTPUT = """curl: (6) Could not resolve host: astral.sh
  × No solution found when resolving tool dependencies:
  ╰─▶ Because pytest-timeout was not found in the cache and you require
      pytest-timeout==2.3.1, we can conclude that your requirements are
      unsatisfiable.

      hint: Packages were unavailable because the network was disabled.
"""


def test_each_command_without_network_is_named_by_its_line_in_test_sh() -> None:
    found = [asdict(item) for item in no_network(APT_OUTPUT, APT_SCRIPT)]
    assert found == [
        {"command": "apt-get update", "message": "Temporary failure resolving 'deb.debian.org'"},
        {"command": "apt-get install -y nginx", "message": "E: Unable to locate package nginx"},
        {
            "command": "pip3 install --break-system-packages flask==3.1.0",
            "message": "No matching distribution found for flask==3.1.0",
        },
    ]


def test_the_installer_and_uvx_are_found_across_continued_lines() -> None:
    found = [asdict(item) for item in no_network(UV_OUTPUT, TB_MISSING_TEST)]
    uvx = (
        "uvx -p 3.13 -w pytest==8.4.1 -w pytest-timeout==2.3.1 pytest --ctrf /logs/verifier/ctrf.json"
        " /tests/test_outputs.py -rA"
    )
    assert found == [
        {"command": UV_INSTALLER, "message": "curl: (6) Could not resolve host: astral.sh"},
        {"command": uvx, "message": "pytest-timeout was not found in the cache and you require"},
    ]


def test_failure_cause_is_one_line_with_the_last_output() -> None:
    details = {"exit_code": 100, "no_network": [asdict(n) for n in no_network(APT_OUTPUT, APT_SCRIPT)]}
    cause = failure_cause(
        None, "test.sh exited 100 without writing /logs/verifier/reward.txt", details, APT_OUTPUT
    )
    assert cause == (
        "test.sh exited 100 without writing /logs/verifier/reward.txt; no network for `apt-get update`"
        " (Temporary failure resolving 'deb.debian.org'), `apt-get install -y nginx` (E: Unable to locate"
        " package nginx), `pip3 install --break-system-packages flask==3.1.0` (No matching distribution"
        " found for flask==3.1.0); last output: Looking in links: /opt/agentworld/wheels | ERROR: Could not"
        " find a version that satisfies the requirement flask==3.1.0 (from versions: none) | ERROR: No"
        " matching distribution found for flask==3.1.0"
    )
    # A zero reward with no error and no network trouble: the reward, the exit status, the output.
    assert failure_cause(0.0, "", {"exit_code": 1}, "FAILED test_x\n1 failed\n") == (
        "reward 0.0; test.sh exited 1; last output: FAILED test_x | 1 failed"
    )

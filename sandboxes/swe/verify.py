"""The `swe_tests` verifier: after the episode, in the same sandbox, do the failing tests now pass
and do the passing ones still pass?

The task's verifier carries the test ids (SWE-bench's FAIL_TO_PASS and PASS_TO_PASS, pytest node
ids), the command that runs them, and optionally a `test_patch` (SWE-bench's added tests). One
command in the sandbox's own isolation puts the test files and pytest's harness (every
`conftest.py`, `pytest.ini`) back as the task's base commit has them, removing harness files the
agent added (an agent that edits a test, or hooks pytest's reports, does not pass by it), applies
the test patch, and runs the
tests with a fixed hash seed and pytest's short summary (`-rfEpxX`), whose `PASSED <node id>` lines
are read back. Reward 1.0 when every FAIL_TO_PASS and PASS_TO_PASS test passes (PASSED or XFAIL, as
SWE-bench counts them), else 0.0; the fraction passing is in the details. A test that does not
appear in the summary (deleted, not collected, a collection error) did not pass.

Verifier shape: {"kind": "swe_tests", "test_command": [...], "FAIL_TO_PASS": [...],
"PASS_TO_PASS": [...], "timeout_s"?: float, "test_patch"?: str}.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS, VerifierError
from sandboxes.swe.backends import Runner
from sandboxes.swe.text import cut_middle
from schemas.records import Verification

SWE_TESTS = "swe_tests"
# pytest's short summary: f(ailed), E(rror), p(assed), x(failed), X(passed); not the P section,
# which repeats the captured output of every passing test.
REPORT = ("-rfEpxX", "--tb=short")
PASSING = ("PASSED", "XFAIL")
DEFAULT_TIMEOUT_S = 300.0
# What the test run may print before its middle is dropped; the summary is at the end, in the tail.
CAPTURE_BYTES = 4 * 1024 * 1024
# Exit statuses of the set-up part of the verifier's command (before the tests run).
RESTORE_FAILED, PATCH_FAILED = 90, 91
_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S.*)$")


def verifier_command(test_command: Sequence[str]) -> list[str]:
    """The test command as the verifier runs it: every test (no `-x`), with the short summary."""
    command = [part for part in test_command if part != "-x"]
    return command + [flag for flag in REPORT if flag not in command]


def parse_summary(output: str) -> dict[str, str]:
    """{node id: PASSED | FAILED | ERROR | XFAIL | XPASS} from pytest's short test summary lines.

    A PASSED line is the node id alone; the others may add ` - <message>` (FAILED, ERROR, and XFAIL
    since pytest 8), so their ids are cut at the first " - " (an id holding one is then not found,
    which counts as not passing, as those statuses do anyway).
    """
    results: dict[str, str] = {}
    for line in output.splitlines():
        found = _SUMMARY.match(line.rstrip())
        if found:
            status, rest = found.groups()
            results[rest if status == "PASSED" else rest.split(" - ", 1)[0]] = status
    return results


def node_files(node_ids: Iterable[str]) -> list[str]:
    """The files a set of pytest node ids live in."""
    return sorted({node.split("::", 1)[0] for node in node_ids if node})


def patch_files(patch: str) -> list[str]:
    """The paths a unified git diff touches (both sides of a rename)."""
    found: set[str] = set()
    for line in patch.splitlines():
        if line.startswith(("--- a/", "+++ b/")):
            found.add(line[6:].split("\t", 1)[0])
    return sorted(found)


def score(results: dict[str, str], fail_to_pass: list[str], pass_to_pass: list[str]) -> tuple[float, dict]:
    """(reward, details): 1.0 when every listed test passed, else 0.0. The details give the status
    of every FAIL_TO_PASS test and of the PASS_TO_PASS tests that did not pass (the others did; the
    full list is in the task's verifier, so it is not repeated in every trajectory)."""
    f2p = {test: results.get(test, "missing") for test in fail_to_pass}
    p2p = {test: results.get(test, "missing") for test in pass_to_pass}
    statuses = [*f2p.values(), *p2p.values()]
    passed = sum(status in PASSING for status in statuses)
    details = {
        "FAIL_TO_PASS": f2p,
        "PASS_TO_PASS_not_passing": {test: status for test, status in p2p.items() if status not in PASSING},
        "passed": passed,
        "total": len(statuses),
        "fraction_passing": passed / len(statuses) if statuses else 0.0,
    }
    return (1.0 if statuses and passed == len(statuses) else 0.0), details


def _string_list(verifier: dict[str, Any], key: str) -> list[str]:
    value = verifier.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise VerifierError(f"the swe_tests verifier's {key!r} must be a list of test ids")
    return value


def base_commit(template: Path) -> str:
    """The commit the task started from: the template's HEAD (our own cache, never the workspace,
    whose git configuration the agent controls)."""
    result = subprocess.run(
        ["git", "-C", str(template), "rev-parse", "--verify", "HEAD^{commit}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
    )
    if result.returncode != 0:
        raise VerifierError(f"the task's repository {template} has no commit: {result.stderr.strip()}")
    return result.stdout.strip()


HARNESS = ("conftest.py", "pytest.ini")


def harness_files(template: Path) -> list[str]:
    """pytest's harness files in the base commit's tree (the template is a checkout of it)."""
    found = (p.relative_to(template) for name in HARNESS for p in template.rglob(name))
    return sorted(str(p) for p in found if ".git" not in p.parts)


def _setup_script(base: str, template: Path, files: list[str], patch_name: str) -> str:
    """Shell lines that put `files` and pytest's harness back as `base` has them and apply the test
    patch, if any."""
    git = "git -c safe.directory='*' -c core.hooksPath=/dev/null"
    files = sorted({*files, *harness_files(template)})
    in_base = [name for name in files if (template / name).is_file()]
    added = [name for name in files if name not in in_base]
    # The hash seed the task's test ids were computed under (sandboxes/swe/mutation_tests.py): tests
    # parametrized over a set get ids in the set's order.
    lines = ["export PYTHONHASHSEED=0"]
    # Harness files the agent added anywhere go first; the base's own come back just below.
    names = " -o ".join(f"-name {name}" for name in HARNESS)
    lines.append(f"find . -path ./.git -prune -o \\( {names} \\) -type f -exec rm -f -- {{}} +")
    if in_base:
        quoted = shlex.join(in_base)
        lines.append(f"{git} checkout -q {base} -- {quoted} >&2 || exit {RESTORE_FAILED}")
    if added:  # files the test patch creates: whatever the agent left there goes first
        lines.append(f"rm -rf -- {shlex.join(added)}")
    if patch_name:
        lines.append(
            f"{git} apply --whitespace=nowarn {patch_name} >&2 || exit {PATCH_FAILED}; rm -f {patch_name}"
        )
    return "\n".join(lines)


@contextmanager
def _workspace_dir(root: str) -> Iterator[int]:
    """The workspace root as a directory descriptor: names opened relative to it never pass
    through a link the agent left (the root itself is our own bind-mount point)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        yield fd
    finally:
        os.close(fd)


def _write_patch(root_fd: int, text: str, owner: tuple[int, int] | None) -> str:
    """The test patch as a new file at the workspace root (exclusive create); its name."""
    name = f".agentworld-test-{secrets.token_hex(6)}.patch"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=root_fd)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        if owner is not None:  # the sandbox's user applies and removes it
            os.fchown(handle.fileno(), *owner)
    return name


def run_swe_tests(runner: Runner, root: str, template: Path, verifier: dict[str, Any]) -> Verification:
    """Run the verifier in the episode's sandbox (`runner`, workspace `root` on the host)."""
    fail_to_pass = _string_list(verifier, "FAIL_TO_PASS")
    pass_to_pass = _string_list(verifier, "PASS_TO_PASS")
    command = verifier.get("test_command")
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        raise VerifierError("the swe_tests verifier needs a 'test_command' list")
    if not fail_to_pass and not pass_to_pass:
        raise VerifierError("the swe_tests verifier lists no tests (FAIL_TO_PASS, PASS_TO_PASS)")
    test_patch = verifier.get("test_patch") or ""
    timeout = float(verifier.get("timeout_s", DEFAULT_TIMEOUT_S))
    files = sorted({*node_files(fail_to_pass + pass_to_pass), *patch_files(test_patch)})
    base = base_commit(template)
    with _workspace_dir(root) as root_fd:
        patch_name = _write_patch(root_fd, test_patch, runner.owner) if test_patch else ""
        try:
            script = _setup_script(base, template, files, patch_name)
            finished = runner.run(f"{script}\nexec {shlex.join(command)}", timeout, CAPTURE_BYTES)
        finally:
            if patch_name:
                with suppress(FileNotFoundError):
                    os.unlink(patch_name, dir_fd=root_fd)
    text = cut_middle(
        finished.head, finished.tail, len(finished.head) + finished.dropped + len(finished.tail)
    )
    output = text[-VERIFIER_OUTPUT_CHARS:]
    if finished.exit_status == PATCH_FAILED:  # the instance's own data is broken, not the end state
        details = {"exit_status": PATCH_FAILED}
        return Verification(SWE_TESTS, None, output, details, error="the test_patch does not apply")
    reward, details = score(parse_summary(text), fail_to_pass, pass_to_pass)
    details.update(exit_status=finished.exit_status, timed_out=finished.timed_out)
    if finished.exit_status == RESTORE_FAILED:
        # The agent broke the repository's git, so the test files could not be put back: the tests
        # that ran are not the task's, and passing them earns nothing.
        details["restore_failed"] = True
        reward = 0.0
    return Verification(SWE_TESTS, reward, output, details)

"""The `swe_tests` verifier: after the episode, in the same sandbox, do the failing tests now pass
and do the passing ones still pass?

The task's verifier carries the test ids (SWE-bench's FAIL_TO_PASS and PASS_TO_PASS, pytest node
ids), the command that runs them, and optionally a `test_patch` (SWE-bench's added tests). The test
files and pytest's harness (every `conftest.py`, `pytest.ini`) are put back as the task's base
commit has them, harness files the agent added are removed (an agent that edits a test, or hooks
pytest's reports, does not pass by it), and the test patch is applied. None of that goes through
the workspace's own `.git`, whose config (filter drivers, an fsmonitor hook), attributes and
objects the agent controls: the base's files are read from the task's template repository (our
cache) and the patch applied to them on the host, in a private directory outside any repository;
the results are staged in the workspace and moved into place by one command in the sandbox's own
isolation, which then runs the tests. That command has the system's PATH, not the agent's
`~/.local/bin` (a `python3` planted there would print what it liked), and no Python user site (a
`usercustomize` there would run inside pytest). The agent's own processes are gone by then: each of
its commands ran as a process tree that ends with it (sandboxes/swe/backends.py). The tests run with
a fixed hash seed and pytest's short summary (`-rfEpxX`), whose `PASSED <node id>` lines are read
back. Reward 1.0 when every FAIL_TO_PASS and PASS_TO_PASS test passes (PASSED or XFAIL, as
SWE-bench counts them), else 0.0; the fraction passing is in the details. A test that does not
appear in the summary (deleted, not collected, a collection error) did not pass. What the tests
import from the repository is the agent's code, and runs in pytest's process: that is the point of
the check, and no verifier of this kind can keep it from touching pytest.

Verifier shape: {"kind": "swe_tests", "test_command": [...], "FAIL_TO_PASS": [...],
"PASS_TO_PASS": [...], "timeout_s"?: float, "test_patch"?: str}.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
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
# The exit status of the set-up part of the verifier's command (before the tests run).
RESTORE_FAILED = 90
# The verifier command's environment: the system's programs (the agent cannot write there), no
# Python user site in the agent's home.
VERIFY_ENV = "export PATH=/usr/local/bin:/usr/bin:/bin PYTHONNOUSERSITE=1 PYTHONHASHSEED=0"
_GIT_ENV = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
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
        env=_GIT_ENV,
    )
    if result.returncode != 0:
        raise VerifierError(f"the task's repository {template} has no commit: {result.stderr.strip()}")
    return result.stdout.strip()


HARNESS = ("conftest.py", "pytest.ini")


def harness_files(template: Path) -> list[str]:
    """pytest's harness files in the base commit's tree (the template is a checkout of it)."""
    found = (p.relative_to(template) for name in HARNESS for p in template.rglob(name))
    return sorted(str(p) for p in found if ".git" not in p.parts)


class PatchError(Exception):
    """The task's test_patch does not apply to its base commit's files."""


def _git(template: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(template), *args], capture_output=True, timeout=120, env=_GIT_ENV)
    if done.returncode != 0:
        raise VerifierError(
            f"git {args[0]} in {template} failed: {done.stderr.decode(errors='replace').strip()}"
        )
    return done.stdout


def restored_files(template: Path, base: str, names: list[str], test_patch: str, into: Path) -> list[str]:
    """Write into `into` each of `names` (the files the test patch touches among them) as the base
    commit has it, with the test patch applied; the names (of `names` and those the patch creates)
    that are then absent: the workspace must not have them. PatchError when the patch does not
    apply."""
    present = [
        n
        for n in _git(template, "ls-tree", "-r", "-z", "--name-only", base, "--", *names).decode().split("\0")
        if n
    ]
    if present:
        archive = _git(template, "archive", "--format=tar", base, "--", *present)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar.getmembers():
                target = into / member.name
                if member.isreg():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    handle = tar.extractfile(member)
                    assert handle is not None
                    target.write_bytes(handle.read())
                    target.chmod(0o755 if member.mode & 0o111 else 0o644)
                elif member.issym():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(member.linkname, target)
    if test_patch:
        patch = into.parent / "test.patch"
        patch.write_text(test_patch, encoding="utf-8")
        # Outside any repository (the ceiling stops the search): git apply works as patch does.
        env = {**_GIT_ENV, "GIT_CEILING_DIRECTORIES": str(into.parent), "HOME": str(into.parent)}
        argv = ["git", "apply", "--whitespace=nowarn", str(patch)]
        done = subprocess.run(argv, cwd=into, capture_output=True, text=True, timeout=120, env=env)
        if done.returncode != 0:
            raise PatchError(done.stderr.strip())
    wanted = sorted({*names, *patch_files(test_patch)})
    return [n for n in wanted if not os.path.lexists(into / n)]


def _setup_script(stage: str, staged: list[str], absent: list[str]) -> str:
    """Shell lines that remove the harness files the agent added, put the staged files in place
    and remove the `absent` ones."""
    lines = [VERIFY_ENV]
    names = " -o ".join(f"-name {name}" for name in HARNESS)
    lines.append(f"find . -path ./.git -prune -o \\( {names} \\) -type f -exec rm -f -- {{}} +")
    for name in sorted({*staged, *absent}):
        quoted = shlex.quote(name)
        lines.append(f"rm -rf -- {quoted} || exit {RESTORE_FAILED}")
        if name in staged:
            parent = shlex.quote(os.path.dirname(name) or ".")
            source = shlex.quote(f"{stage}/{name}")
            lines.append(f"mkdir -p -- {parent} && mv -- {source} {quoted} || exit {RESTORE_FAILED}")
    lines.append(f"rm -rf -- {shlex.quote(stage)}")
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


@contextmanager
def _staged(root: str, restored: Path, owner: tuple[int, int] | None) -> Iterator[tuple[str, list[str]]]:
    """The restored files copied into a new directory at the workspace root: (its name, the files
    in it). Removed afterwards if the verifier's command left it."""
    stage = f".agentworld-verify-{secrets.token_hex(6)}"
    with _workspace_dir(root) as root_fd:
        os.mkdir(stage, 0o755, dir_fd=root_fd)  # a new name: nothing of the agent's is there
    target = os.path.join(root, stage)
    try:
        shutil.copytree(restored, target, symlinks=True, dirs_exist_ok=True)
        staged: list[str] = []
        for parent, dirs, files in os.walk(target):
            for name in dirs + files:
                if owner is not None:
                    os.lchown(os.path.join(parent, name), *owner)
            staged += [os.path.relpath(os.path.join(parent, f), target) for f in files]
            staged += [
                os.path.relpath(os.path.join(parent, d), target)
                for d in dirs
                if os.path.islink(os.path.join(parent, d))
            ]
        if owner is not None:
            os.lchown(target, *owner)
        yield stage, staged
    finally:
        shutil.rmtree(target, ignore_errors=True)


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
    names = sorted(
        {*node_files(fail_to_pass + pass_to_pass), *patch_files(test_patch), *harness_files(template)}
    )
    with tempfile.TemporaryDirectory(prefix="agentworld-swe-verify-") as scratch:
        restored = Path(scratch) / "files"
        restored.mkdir()
        try:
            absent = restored_files(template, base_commit(template), names, test_patch, restored)
        except PatchError as exc:  # the instance's own data is broken, not the end state
            return Verification(
                SWE_TESTS, None, str(exc)[-VERIFIER_OUTPUT_CHARS:], {}, error="the test_patch does not apply"
            )
        with _staged(root, restored, runner.owner) as (stage, staged):
            script = _setup_script(stage, staged, absent)
            finished = runner.run(f"{script}\nexec {shlex.join(command)}", timeout, CAPTURE_BYTES)
    text = cut_middle(
        finished.head, finished.tail, len(finished.head) + finished.dropped + len(finished.tail)
    )
    output = text[-VERIFIER_OUTPUT_CHARS:]
    reward, details = score(parse_summary(text), fail_to_pass, pass_to_pass)
    details.update(exit_status=finished.exit_status, timed_out=finished.timed_out)
    if finished.exit_status == RESTORE_FAILED:
        # The test files could not be put back (the agent left something in their way that even
        # rm could not remove): the tests that ran are not the task's, and passing them earns nothing.
        details["restore_failed"] = True
        reward = 0.0
    return Verification(SWE_TESTS, reward, output, details)

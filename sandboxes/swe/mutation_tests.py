"""Running a repository's test command while tasks are prepared (finding a mutation that fails).

The command runs with Debian's python3 and pytest (`/usr/bin` first on PATH), without the network
and with the rest of the file system read-only when bubblewrap works here, in its own process group
that is killed at the timeout.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TEST_ENV = {
    "PATH": "/usr/bin:/bin",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}


@dataclass(frozen=True)
class TestRun:
    exit_status: int | None  # None when it timed out
    timed_out: bool
    output: str
    duration_s: float

    __test__ = False  # not a pytest test class

    @property
    def failed(self) -> bool:
        """Tests ran and at least one failed (pytest and unittest exit 1); not a timeout, not a
        collection error (exit 2), not "no tests" (exit 5)."""
        return self.exit_status == 1

    @property
    def summary(self) -> str:
        if self.timed_out:
            return f"timed out after {self.duration_s:.0f} s"
        lines = [line for line in self.output.strip().splitlines() if line.strip()]
        return f"exit {self.exit_status}: {lines[-1] if lines else 'no output'}"


@functools.cache
def bwrap_works() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def isolated(command: Sequence[str], repo: Path, binds: Sequence[Path]) -> list[str]:
    """The command inside bubblewrap: everything read-only but the repository and a private /tmp,
    no network, its own pid namespace; as is when bubblewrap does not work here."""
    if not bwrap_works():
        return list(command)
    return [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        "--bind", str(repo), str(repo), *[arg for path in binds for arg in ("--bind", str(path), str(path))],
        "--unshare-net", "--unshare-pid", "--die-with-parent", "--chdir", str(repo), *command,
    ]  # fmt: skip


def run_tests(
    repo: Path, command: Sequence[str], timeout_s: float, extra_binds: Sequence[Path] = ()
) -> TestRun:
    """Run the test command in repo; bounded by timeout_s."""
    repo = Path(repo).resolve()
    with tempfile.TemporaryDirectory(prefix="agentworld-swe-home-") as home:
        env = {**TEST_ENV, "HOME": home, "TMPDIR": "/tmp"}
        started = time.monotonic()
        process = subprocess.Popen(
            isolated(command, repo, [Path(home), *extra_binds]),
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate(timeout=30)
            timed_out = True
        duration = time.monotonic() - started
    text = output.decode("utf-8", errors="replace")
    return TestRun(None if timed_out else process.returncode, timed_out, text, duration)


# Run pytest in-process under a line tracer limited to the given files; write what ran as JSON.
_LINE_TRACER = """
import json, os, sys, threading
out, files, args = sys.argv[1], set(json.loads(sys.argv[2])), json.loads(sys.argv[3])
seen = {}
def local(frame, event, arg):
    if event == "line":
        seen.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
    return local
def tracer(frame, event, arg):
    if frame.f_code.co_filename in files:
        seen.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
        return local
    return None
sys.settrace(tracer)
threading.settrace(tracer)
import pytest
status = pytest.main(args)
sys.settrace(None)
with open(out, "w") as handle:
    json.dump({"status": int(status), "lines": {k: sorted(v) for k, v in seen.items()}}, handle)
"""


def executed_lines(
    repo: Path, command: Sequence[str], timeout_s: float, files: Sequence[str]
) -> dict[str, set[int]] | None:
    """Lines of `files` (relative) that the passing test suite runs, or None when the command is
    not `python3 -m pytest ...` or the traced run fails: then every site is a candidate."""
    prefix = _env_prefix(command)
    if list(command[len(prefix) : len(prefix) + 3]) != ["python3", "-m", "pytest"]:
        return None
    repo = Path(repo).resolve()
    absolute = {str(repo / name): name for name in files}
    with tempfile.TemporaryDirectory(prefix="agentworld-swe-trace-") as scratch:
        script, result = Path(scratch) / "trace_lines.py", Path(scratch) / "lines.json"
        script.write_text(_LINE_TRACER)
        arguments = json.dumps(list(command[len(prefix) + 3 :]))
        traced = [*prefix, "python3", str(script), str(result), json.dumps(sorted(absolute)), arguments]
        run = run_tests(repo, traced, timeout_s * 3, extra_binds=(Path(scratch),))
        if run.timed_out or not result.exists():
            return None
        found = json.loads(result.read_text())
    if found["status"] != 0:
        return None
    return {absolute[path]: set(lines) for path, lines in found["lines"].items() if path in absolute}


def _env_prefix(command: Sequence[str]) -> list[str]:
    """The leading `env NAME=VALUE ...` of a command (empty when it has none)."""
    if not command or command[0] != "env":
        return []
    count = 1
    while count < len(command) and "=" in command[count] and not command[count].startswith("-"):
        count += 1
    return list(command[:count])

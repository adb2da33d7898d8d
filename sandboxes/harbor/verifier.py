"""The "harbor" verifier: a task's `tests/test.sh`, run in the episode's own container afterwards.

    {"kind": "harbor", "tests_dir": "/path/to/task/tests", "timeout_sec": 600, "user": null}

As Harbor does it: `tests/` is copied to `/tests`, test.sh runs with bash (as the verifier's user,
else the image's, with the verifier timeout), and the reward is read from
`/logs/verifier/reward.json` (numbers by name: all go to `details`, the reward is its "reward"
key, else their mean) or else `/logs/verifier/reward.txt` (one number). No reward file, an
unreadable one, a value outside [0, 1] or a timeout is an error (reward None), with test.sh's exit
status and output, not a zero: the check did not run.

The agent may have been root in that container, so nothing it could have touched decides the
reward. The caller first restarts the container (`sandboxes.terminal.verify.end_agent`): every
process the agent started is gone, a daemon that would rewrite /tests or the reward file included.
Then static bash and busybox from the host (`bash-static`, `busybox-static`: no dynamic loader or
libc of the container's) are copied into a fresh directory, and with them `/tests` and
`/logs/verifier` are made anew (whatever the agent left there removed), tests/ unpacked root-owned
and not writable by others, and test.sh run. Its time bound is kept from the host, not by the
container's `timeout`. When it ends the container is killed, so nothing it started can change the
reward file afterwards, and the reward files are read from the stopped container by `docker cp`.
What test.sh itself runs (python3, pytest, grep) is the container's, as in Harbor: a task whose
checks must not depend on the agent's end state of those programs has to bring its own.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import tarfile
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS
from sandboxes.harbor.diagnose import no_network
from schemas.records import Verification

HARBOR = "harbor"
REWARD_DIR = "/logs/verifier"
REWARD_FILES = ("reward.json", "reward.txt")  # reward.json first, as Harbor prefers it
REWARD_MAX_BYTES = 1 << 20
# Beyond test.sh's own timeout: docker's start and copies.
DOCKER_TIMEOUT_S = 60.0
EXEC_GRACE_S = 5.0
# Where the static tools are looked for on the host, and the packages that install them.
STATIC_TOOLS = {
    "bash": (("/bin/bash-static", "/usr/bin/bash-static"), "bash-static"),
    "busybox": (("/bin/busybox", "/usr/bin/busybox"), "busybox-static"),
}
# Run by the static busybox's sh as root. Arguments: TOOLS_DIR. stdin: the tests/ tar.
_PREPARE = (
    'b="$1/busybox"; "$b" rm -rf /tests '
    + REWARD_DIR
    + ' && "$b" mkdir -p /tests '
    + REWARD_DIR
    + ' && "$b" chmod 777 '
    + REWARD_DIR
    + ' && "$b" tar -x -C /tests'
)
# Run by the static busybox's sh as the verifier's user. Arguments: TOOLS_DIR.
_TEST = 'exec "$1/bash" /tests/test.sh </dev/null 2>&1'
# SHELL set: otherwise bash looks its user up at start, and a static glibc would load the NSS
# modules the container's /etc/nsswitch.conf names.
_EXEC_ENV = ("-e", "SHELL=/bin/bash")


class ToolsMissing(RuntimeError):
    """The host has no static bash or busybox to run the verifier with."""


class SetupError(RuntimeError):
    """The verifier's tools or the task's tests could not be put in the container."""


def _static(path: str) -> bool:
    """Whether an ELF executable has no program interpreter (the dynamic loader): a static one."""
    with open(path, "rb") as f:
        header = f.read(64)
        if header[:4] != b"\x7fELF" or header[4] != 2:  # 64-bit ELF only
            return False
        order = "little" if header[5] == 1 else "big"
        phoff = int.from_bytes(header[32:40], order)
        phentsize = int.from_bytes(header[54:56], order)
        phnum = int.from_bytes(header[56:58], order)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(int.from_bytes(table[i : i + 4], order) != 3 for i in range(0, len(table), phentsize))


def static_tools() -> dict[str, str]:
    """{"bash": host path, "busybox": host path} of statically linked tools; ToolsMissing saying
    which package to install otherwise."""
    found: dict[str, str] = {}
    for name, (paths, package) in STATIC_TOOLS.items():
        path = next((p for p in paths if os.path.isfile(p) and _static(p)), None)
        if path is None:
            raise ToolsMissing(
                f"the Harbor verifier needs a static {name} on the host ({' or '.join(paths)}):"
                f" apt-get install {package} (make setup does)"
            )
        found[name] = path
    return found


def _tools_tar(tools: dict[str, str], directory: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        top = tarfile.TarInfo(directory)
        top.type, top.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(top)
        for name, path in tools.items():
            info = tar.gettarinfo(path, f"{directory}/{name}")
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = 0o555
            with open(path, "rb") as f:
                tar.addfile(info, f)
    return buffer.getvalue()


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """tests/ as the verifier sees it: root's, readable by all, writable by none but root."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    executable = info.isdir() or info.mode & 0o100
    info.mode = (info.mode | 0o444 | (0o111 if executable else 0)) & ~0o022
    return info


def _tests_tar(tests_dir: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(tests_dir, arcname=".", filter=_root_owned)
    return buffer.getvalue()


def _docker(
    argv: list[str], stdin: bytes = b"", timeout: float = DOCKER_TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["docker", *argv], input=stdin, capture_output=True, timeout=timeout)


def _read_rewards(container: str) -> dict[str, str]:
    """The reward files test.sh left (regular files only), from the stopped container."""
    copied = _docker(["cp", f"{container}:{REWARD_DIR}", "-"])
    if copied.returncode != 0:
        return {}  # no /logs/verifier at all: test.sh removed it
    found: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(copied.stdout)) as tar:
        for member in tar.getmembers():
            name = member.name.split("/", 1)[-1]
            if member.name.count("/") == 1 and name in REWARD_FILES and member.isreg():
                handle = tar.extractfile(member)
                assert handle is not None
                found[name] = handle.read(REWARD_MAX_BYTES).decode("utf-8", errors="replace")
    return found


def parse_reward(name: str, text: str) -> tuple[float, dict[str, Any]]:
    """(reward, details) from a reward file's text; ValueError saying what is wrong with it."""
    if name == "reward.json":
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"reward.json is not JSON ({exc.msg}): {text[:200]!r}") from None
        if isinstance(values, int | float) and not isinstance(values, bool):
            values = {"reward": values}
        if not isinstance(values, dict) or not values:
            raise ValueError(f"reward.json must be an object of numbers: {text[:200]!r}")
        bad = {k: v for k, v in values.items() if isinstance(v, bool) or not isinstance(v, int | float)}
        if bad or not all(math.isfinite(v) for v in values.values()):
            raise ValueError(f"reward.json holds values that are not finite numbers: {text[:200]!r}")
        reward = values["reward"] if "reward" in values else sum(values.values()) / len(values)
        details: dict[str, Any] = {"rewards": values}
    else:
        try:
            reward = float(text.strip())
        except ValueError:
            raise ValueError(f"reward.txt is not a number: {text[:200]!r}") from None
        if not math.isfinite(reward):
            raise ValueError(f"reward.txt is not a finite number: {text.strip()!r}")
        details = {}
    if not 0.0 <= reward <= 1.0:
        raise ValueError(f"reward {reward:g} from {name} is outside [0, 1]")
    return float(reward), details


def _run(
    container: str, verifier: dict[str, Any], tools: dict[str, str], tests: bytes
) -> tuple[str, int | None]:
    """(test.sh's output, its exit status; None when it ran past the timeout). SetupError when
    the tools or the tests cannot be put in place."""
    timeout = float(verifier.get("timeout_sec") or 600.0)
    user = str(verifier.get("user") or "")
    as_root = user in ("", "root", "0")
    # A new name each time: nothing in the container can have been waiting at it.
    tools_dir = f"/.agentworld-verifier-{uuid.uuid4().hex}"
    ready = f"@@agentworld-verifier-ready-{uuid.uuid4().hex}@@"
    copied = _docker(["cp", "-", f"{container}:/"], _tools_tar(tools, tools_dir.lstrip("/")))
    if copied.returncode != 0:
        raise SetupError(
            f"cannot copy the verifier's tools in: {copied.stderr.decode(errors='replace').strip()}"
        )
    busybox = [f"{tools_dir}/busybox", "sh", "-c"]
    script = f"{_PREPARE} && echo {ready}" + (f" && {_TEST}" if as_root else "")
    run = ["exec", "-i", "-u", "root", *_EXEC_ENV, container, *busybox, script, "sh", tools_dir]
    try:
        ran = _docker(run, tests, timeout + EXEC_GRACE_S if as_root else DOCKER_TIMEOUT_S)
        text = ran.stdout.decode("utf-8", errors="replace")
        before, found, output = text.partition(f"{ready}\n")
        if not found:
            why = (before + ran.stderr.decode(errors="replace")).strip()[-2000:]
            raise SetupError(f"cannot put tests/ in place ({ran.returncode}): {why}")
        if not as_root:
            test = ["exec", "-u", user, *_EXEC_ENV, container, *busybox, _TEST, "sh", tools_dir]
            ran = _docker(test, timeout=timeout + EXEC_GRACE_S)
            output = ran.stdout.decode("utf-8", errors="replace")
        return output + ran.stderr.decode("utf-8", errors="replace"), ran.returncode
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode("utf-8", errors="replace") if isinstance(exc.stdout, bytes) else ""
        return partial.partition(f"{ready}\n")[2] or partial, None


def _test_sh(tests_dir: str) -> str:
    try:
        return (Path(tests_dir) / "test.sh").read_text(errors="replace")
    except OSError:
        return ""


def run_test_sh(container: str, verifier: dict[str, Any]) -> Verification:
    """Run the task's test.sh in `container` (the episode's, its processes ended by `end_agent`)
    and read the reward; the container is left stopped.

    One `docker exec` prepares and runs test.sh when test.sh runs as root (the usual case), two
    otherwise: docker calls are most of the verifier's cost on short episodes."""
    timeout = float(verifier.get("timeout_sec") or 600.0)
    try:
        tools = static_tools()
        tests = _tests_tar(verifier["tests_dir"])
    except ToolsMissing as exc:
        return Verification(HARBOR, error=str(exc))
    except OSError as exc:
        return Verification(HARBOR, error=f"cannot pack tests/: {exc}")
    try:
        text, code = _run(container, verifier, tools, tests)
    except SetupError as exc:
        return Verification(HARBOR, error=str(exc))
    finally:
        # Nothing test.sh (or what it started) left running may change the reward files afterwards.
        _docker(["kill", container])
    output = text[-VERIFIER_OUTPUT_CHARS:]
    details: dict[str, Any] = {}
    offline = no_network(text, _test_sh(verifier["tests_dir"]))
    if offline:  # the commands that found no network, tolerated or not: for the failure's cause
        details["no_network"] = [asdict(item) for item in offline]
    if code is None:
        error = f"test.sh timed out after {timeout:g} s"
        return Verification(HARBOR, output=output, details=details, error=error)
    details["exit_code"] = code
    files = _read_rewards(container)
    name = next((n for n in REWARD_FILES if n in files), None)
    if name is None:
        return Verification(
            HARBOR,
            output=output,
            details=details,
            error=f"test.sh exited {code} without writing {REWARD_DIR}/reward.txt or reward.json",
        )
    details["reward_file"] = name
    try:
        reward, found = parse_reward(name, files[name])
    except ValueError as exc:
        return Verification(HARBOR, output=output, details=details, error=str(exc))
    return Verification(HARBOR, reward=reward, output=output, details={**details, **found})

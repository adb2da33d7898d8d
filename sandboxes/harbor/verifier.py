"""The "harbor" verifier: a task's `tests/test.sh`, run in the episode's own container afterwards.

    {"kind": "harbor", "tests_dir": "/path/to/task/tests", "timeout_sec": 600, "user": null}

As Harbor does it: `tests/` is copied to `/tests`, `bash /tests/test.sh` runs (as the verifier's
user, else the image's, with the verifier timeout), and the reward is read from
`/logs/verifier/reward.json` (numbers by name: all go to `details`, the reward is its "reward"
key, else their mean) or else `/logs/verifier/reward.txt` (one number). Reward files the agent
left are removed first. No reward file, an unreadable one, a value outside [0, 1] or a timeout is
an error (reward None), with test.sh's exit status and output, not a zero: the check did not run.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import tarfile
import uuid
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS
from schemas.records import Verification

HARBOR = "harbor"
REWARD_DIR = "/logs/verifier"
# Beyond test.sh's own timeout: docker's start and copy.
DOCKER_TIMEOUT_S = 60.0


def _tests_tar(tests_dir: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(tests_dir, arcname=".")
    return buffer.getvalue()


def _docker_exec(
    container: str, user: str, script: str, stdin: bytes, timeout: float
) -> subprocess.CompletedProcess[bytes]:
    user_args = ["-u", user] if user else []
    argv = ["docker", "exec", "-i", *user_args, container, "bash", "--norc", "-c", script]
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout)


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


def run_test_sh(container: str, verifier: dict[str, Any]) -> Verification:
    """Run the task's test.sh in `container` (the episode's, after its last step) and read the reward.

    One `docker exec` when test.sh runs as root (the usual case), two otherwise: docker calls are
    most of the verifier's cost on short episodes."""
    timeout = float(verifier.get("timeout_sec") or 600.0)
    user = str(verifier.get("user") or "")
    marker = f"@@agentworld-verifier-{uuid.uuid4().hex}@@"
    prepare = (
        f"rm -rf /tests {REWARD_DIR}/reward.txt {REWARD_DIR}/reward.json && mkdir -p /tests {REWARD_DIR}"
        f" && chmod 777 {REWARD_DIR} && tar -x -C /tests && chmod -R a+rX /tests"
    )
    # `timeout` inside the container: killing the docker client would leave test.sh running there.
    test = (
        f"{{ timeout -k 5 {timeout:g} bash /tests/test.sh; code=$?; }} 2>&1; echo; echo {marker} code $code;"
        f" for f in reward.json reward.txt; do [ -f {REWARD_DIR}/$f ] && echo {marker} file $f"
        f" && cat {REWARD_DIR}/$f; done; true"
    )
    try:
        tar = _tests_tar(verifier["tests_dir"])
        if user in ("", "root", "0"):
            ran = _docker_exec(container, "root", f"{prepare} && {test}", tar, timeout + DOCKER_TIMEOUT_S)
        else:
            ran = _docker_exec(container, "root", prepare, tar, DOCKER_TIMEOUT_S)
            if ran.returncode == 0:
                ran = _docker_exec(container, user, test, b"", timeout + DOCKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Verification(HARBOR, error=f"test.sh did not finish within {timeout:g} s (docker exec hung)")
    except OSError as exc:
        return Verification(HARBOR, error=f"cannot pack tests/: {exc}")
    text = (ran.stdout + ran.stderr).decode("utf-8", errors="replace")
    output, _, tail = text.partition(f"\n{marker} code ")
    if not tail:
        why = f"cannot run test.sh ({ran.returncode})"
        return Verification(HARBOR, output=text[-VERIFIER_OUTPUT_CHARS:], error=why)
    code_text, *files = tail.split(f"{marker} file ")
    code = int(code_text.strip() or -1)
    details: dict[str, Any] = {"exit_code": code}
    output = output[-VERIFIER_OUTPUT_CHARS:]
    if code in (124, 137):
        return Verification(
            HARBOR, output=output, details=details, error=f"test.sh timed out after {timeout:g} s"
        )
    if not files:
        return Verification(
            HARBOR,
            output=output,
            details=details,
            error=f"test.sh exited {code} without writing {REWARD_DIR}/reward.txt or reward.json",
        )
    name, _, content = files[0].partition("\n")  # reward.json first, as Harbor prefers it
    details["reward_file"] = name
    try:
        reward, found = parse_reward(name, content)
    except ValueError as exc:
        return Verification(HARBOR, output=output, details=details, error=str(exc))
    return Verification(HARBOR, reward=reward, output=output, details={**details, **found})

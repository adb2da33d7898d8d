"""The terminal's task verifier: check commands run beside the agent's shell after the episode.

    {"kind": "command", "command": "grep -qx 3 count.txt"}          reward 1 if it exits 0, else 0
    {"kind": "command", "checks": ["test -x run.sh", "./run.sh | grep -q ok"]}
                                                                     reward = share of checks passing
    optional "timeout_s" per check (default 30)

The checks run in the episode's own environment (`docker exec`, or a second bwrap over the same
private home), never typed into the agent's pane. Before they run, `end_agent` kills everything the
agent started (its pane, what it left running in the background, setsid and double-forked daemons
included), so nothing of it can change the end state while it is read. The checks do not trust the
agent's tools either: a fixed system PATH, no Python user site (`~/.local`), and git's fsmonitor
hook off (a repository's own `core.fsmonitor` can make `git diff` report a changed file as clean).
One environment entry runs them all, each in its own `bash -c`, because entering the environment is
most of a verifier's cost. When the whole run exceeds its time bound (timeout_s per check), the
checks that did not report fail.
"""

from __future__ import annotations

import subprocess
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS, SandboxError, VerifierError
from sandboxes.containment import ProcessBox, kill_cgroup
from sandboxes.terminal.backends import DockerInstance, Instance
from sandboxes.terminal.reaper import run_quietly
from schemas.records import Verification

COMMAND = "command"
DEFAULT_TIMEOUT_S = 30.0
DOCKER_TIMEOUT_S = 60.0


def end_agent(instance: Instance, box: ProcessBox | None) -> None:
    """Kill every process the agent started, before a verifier reads the end state it left.

    The box holds the pane (its tmux server and what that started: a local shell's jobs, the
    bwrap of a bwrap sandbox). A bwrap sandbox's limit cgroups hold its processes too. A container's
    processes belong to the docker engine, not to us: restarting the container ends its PID
    namespace, so every process in it dies, whatever it did to detach, and its files stay."""
    if box is not None:
        box.kill()
    for cgroup in getattr(instance, "cgroups", ()):
        kill_cgroup(cgroup)
    if isinstance(instance, DockerInstance):
        try:
            done = run_quietly(
                ["docker", "restart", "-t", "0", instance.container_id], timeout=DOCKER_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            raise SandboxError(f"docker restart did not finish within {DOCKER_TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            raise SandboxError(f"cannot stop the agent's processes (docker restart): {done.stderr.strip()}")


def checks_of(verifier: dict[str, Any]) -> list[str]:
    checks = verifier.get("checks") or ([verifier["command"]] if "command" in verifier else [])
    if not checks or not all(isinstance(c, str) and c.strip() for c in checks):
        raise VerifierError("a 'command' verifier needs a non-empty 'command' or a list of 'checks'")
    return list(checks)


# Each check's output, then a line of this separator and its exit status. The checks travel as
# positional arguments, never spliced into the script. The environment the checks get: the system's
# programs only (the agent cannot write there), none of the agent's Python user site, and git
# ignoring a fsmonitor hook the repository's config may name (env config outranks the repository's).
_SEPARATOR = "\x1eagentworld-check-exit"
_CHECK_ENV = (
    "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONNOUSERSITE=1"
    " GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0=false;"
    " unset BASH_ENV ENV PYTHONPATH PYTHONSTARTUP"
)
_RUNNER = (
    f'{_CHECK_ENV}; for c in "$@"; do bash --norc -c "$c" </dev/null 2>&1;'
    f' printf "\\n{_SEPARATOR} %d\\n" "$?"; done'
)


def run_checks(instance: Instance, verifier: dict[str, Any]) -> Verification:
    checks = checks_of(verifier)
    timeout = float(verifier.get("timeout_s", DEFAULT_TIMEOUT_S)) * len(checks)
    argv = instance.exec_argv(_RUNNER, *checks)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout)
        stdout, trailer = done.stdout, ""
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        stdout = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        trailer = f"[timed out after {timeout:g} s]"
    # "out0 \n SEP code0 \n out1 \n SEP code1 ...": the part after check n's separator starts with
    # its exit status, then check n+1's output.
    parts = stdout.split(f"\n{_SEPARATOR} ")
    outputs, codes = [parts[0]], []
    for part in parts[1:]:
        code, _, output = part.partition("\n")
        codes.append(int(code))
        outputs.append(output)
    results: list[dict[str, Any]] = []
    log: list[str] = []
    for n, check in enumerate(checks):
        code = codes[n] if n < len(codes) else None
        output = outputs[n].rstrip() if n < len(outputs) else ""
        results.append({"command": check, "exit_code": code, "passed": code == 0})
        log.append(f"$ {check}\n{output}\n[exit {code}]")
    if trailer:
        log.append(trailer)
    passed = sum(r["passed"] for r in results)
    return Verification(
        verifier=COMMAND,
        reward=passed / len(results),
        output="\n".join(log)[-VERIFIER_OUTPUT_CHARS:],
        details={"checks": results, "passed": passed, "total": len(results)},
    )

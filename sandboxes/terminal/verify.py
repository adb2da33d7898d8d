"""The terminal's task verifier: check commands run beside the agent's shell after the episode.

    {"kind": "command", "command": "grep -qx 3 count.txt"}          reward 1 if it exits 0, else 0
    {"kind": "command", "checks": ["test -x run.sh", "./run.sh | grep -q ok"]}
                                                                     reward = share of checks passing
    optional "timeout_s" per check (default 30)

The checks run in the episode's own environment (`docker exec`, or a second bwrap over the same
private home), never typed into the agent's pane: whatever the agent left running there (an editor,
a pager) cannot change the verdict. One environment entry runs them all, each in its own `bash -c`,
because entering the environment is most of a verifier's cost. When the whole run exceeds its time
bound (timeout_s per check), the checks that did not report fail.
"""

from __future__ import annotations

import subprocess
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS, VerifierError
from sandboxes.terminal.backends import Instance
from schemas.records import Verification

COMMAND = "command"
DEFAULT_TIMEOUT_S = 30.0


def checks_of(verifier: dict[str, Any]) -> list[str]:
    checks = verifier.get("checks") or ([verifier["command"]] if "command" in verifier else [])
    if not checks or not all(isinstance(c, str) and c.strip() for c in checks):
        raise VerifierError("a 'command' verifier needs a non-empty 'command' or a list of 'checks'")
    return list(checks)


# Each check's output, then a line of this separator and its exit status. The checks travel as
# positional arguments, never spliced into the script.
_SEPARATOR = "\x1eagentworld-check-exit"
_RUNNER = f'for c in "$@"; do bash --norc -c "$c" </dev/null 2>&1; printf "\\n{_SEPARATOR} %d\\n" "$?"; done'


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

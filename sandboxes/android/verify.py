"""The android domain's verifier: checks on the screen (and, on a real device, the system state) the
episode left, read after its last step.

    {"kind": "android_state",
     "checks": [{"node": {"id": "com.android.contacts:id/first_name", "text": "Ines"}}],
     "device_checks": [{"shell": "settings get secure ui_night_mode", "equals": "2"}]}

`checks` run on every driver. A `node` check passes when some node of the UI tree (the sandbox's
own observation, read again without a screenshot) matches every field given: `class`, `text`,
`desc`, `id` exactly, `text_regex` and `desc_regex` searched, `flags` all present (checked,
selected, ...); `no_node` passes when none does; `package` compares the current package.

`device_checks` are the real-device path: Appium's fake driver (the tests' stand-in, since no
emulator runs on our machines) has no system state and a page source that never changes, so they
are skipped there and listed in `details["skipped"]`. On UiAutomator2 they run as well: node checks
as above, and `shell` checks run one `adb shell` command through the session's own driver
(`mobile: shell`, which the sandbox's Appium server allows for UiAutomator2) and compare its
trimmed output (`equals`, `contains` or `regex`). The reward is the share of the checks run that
pass; a verifier whose every check was skipped cannot score (reward None, with the reason).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sandboxes.android.tree_text import AndroidTree, Node
from sandboxes.base import VERIFIER_OUTPUT_CHARS, VerifierError
from sandboxes.tree_checks import check_node_pattern
from schemas.records import Verification

KIND = "android_state"
_NODE_FIELDS = {"class", "text", "desc", "id", "text_regex", "desc_regex", "flags"}
_SHELL_FIELDS = {"shell", "equals", "contains", "regex"}


def _check_shape(check: Any, where: str) -> None:
    if not isinstance(check, dict) or len(check) == 0:
        raise VerifierError(f"{where} must be an object, got {check!r}")
    keys = set(check)
    if keys in ({"node"}, {"no_node"}):
        pattern = check.get("node", check.get("no_node"))
        check_node_pattern(pattern, _NODE_FIELDS, ("text_regex", "desc_regex"), where)
    elif keys == {"package"}:
        if not isinstance(check["package"], str):
            raise VerifierError(f"{where}: 'package' must be a string")
    elif "shell" in keys:
        if keys - _SHELL_FIELDS or not isinstance(check["shell"], str) or len(keys) != 2:
            raise VerifierError(f"{where}: a shell check is 'shell' and one of equals, contains, regex")
    else:
        raise VerifierError(f"{where} must have 'node', 'no_node', 'package' or 'shell', got {sorted(keys)}")


def parse_checks(verifier: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(checks, device_checks), validated; VerifierError names the first malformed one."""
    checks, device = verifier.get("checks", []), verifier.get("device_checks", [])
    if not isinstance(checks, list) or not isinstance(device, list) or not (checks or device):
        raise VerifierError("an android_state verifier needs a list of 'checks' or 'device_checks'")
    for n, check in enumerate(checks):
        _check_shape(check, f"check {n}")
        if "shell" in check:
            raise VerifierError(f"check {n}: a shell check needs a real device: put it in 'device_checks'")
    for n, check in enumerate(device):
        _check_shape(check, f"device check {n}")
    return checks, device


def _matches(node: Node, pattern: dict[str, Any]) -> bool:
    return (
        ("class" not in pattern or node.cls == pattern["class"])
        and ("text" not in pattern or node.text == pattern["text"])
        and ("desc" not in pattern or node.desc == pattern["desc"])
        and ("id" not in pattern or node.rid == pattern["id"])
        and ("text_regex" not in pattern or re.search(pattern["text_regex"], node.text) is not None)
        and ("desc_regex" not in pattern or re.search(pattern["desc_regex"], node.desc) is not None)
        and set(pattern.get("flags", [])) <= node.flags
    )


def _node_check(pattern: dict[str, Any], tree: AndroidTree, wanted: bool) -> tuple[bool, str]:
    found = [node for node in tree.nodes if _matches(node, pattern)]
    if found:
        node = found[0]
        return (
            wanted,
            f"found [{node.index}] {node.cls} {node.text!r} desc={node.desc!r} flags={sorted(node.flags)}",
        )
    # What was there instead: the nodes with the same id (or class), so a failure says what it saw.
    near = {k: v for k, v in pattern.items() if k == "id"} or {
        k: v for k, v in pattern.items() if k == "class"
    }
    seen = [f"{n.cls} {n.text!r} desc={n.desc!r}" for n in tree.nodes if near and _matches(n, near)]
    return not wanted, "no such node" + (f"; seen instead: {'; '.join(seen[:5])}" if seen else "")


def _shell_check(check: dict[str, Any], shell: Callable[[str], str]) -> tuple[bool, str]:
    output = shell(check["shell"]).strip()
    shown = f"output {output[:300]!r}"
    if "equals" in check:
        return output == check["equals"], shown
    if "contains" in check:
        return check["contains"] in output, shown
    return re.search(check["regex"], output) is not None, shown


def evaluate(
    verifier: dict[str, Any], tree: AndroidTree, device: bool, shell: Callable[[str], str]
) -> Verification:
    """The verification of the verifier's checks against `tree`; `device`: a real device, where the
    device checks run too (`shell` runs one adb shell command there)."""
    checks, device_checks = parse_checks(verifier)
    to_run = [*checks, *device_checks] if device else checks
    skipped = [] if device else device_checks
    results, lines = [], []
    for check in to_run:
        if "shell" in check:
            passed, seen = _shell_check(check, shell)
        elif "package" in check:
            passed, seen = tree.package == check["package"], f"the package is {tree.package!r}"
        else:
            wanted = "node" in check
            passed, seen = _node_check(check["node" if wanted else "no_node"], tree, wanted)
        results.append({"check": check, "passed": passed, "seen": seen})
        lines.append(f"{'PASS' if passed else 'FAIL'} {check}: {seen}")
    lines += [f"SKIP {check}: needs a real device (the fake driver has no system state)" for check in skipped]
    passed_count = sum(r["passed"] for r in results)
    details = {"checks": results, "passed": passed_count, "total": len(results), "skipped": skipped}
    output = "\n".join(lines)[-VERIFIER_OUTPUT_CHARS:]
    if not results:
        error = "every check of this verifier needs a real device; the fake driver cannot run them"
        return Verification(verifier=KIND, output=output, details=details, error=error)
    return Verification(verifier=KIND, reward=passed_count / len(results), output=output, details=details)

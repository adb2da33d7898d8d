"""The os domain's verifier: checks on the desktop the episode left, read after its last step.

    {"kind": "desktop_state", "checks": [
        {"node": {"window": "Calculator", "role": "text", "states": ["editable"], "value": "13"}},
        {"no_node": {"role": "frame", "name_regex": "Mousepad"}},
        {"file": "notes.txt", "contains": "Meeting at 10"}]}

A `node` check passes when some node of the accessibility tree (the sandbox's own observation, read
once, unsettled, without a screenshot: the last step already waited for it to settle) matches every
field given: `role`, `name` and `value` exactly (a node shown without a value has the value ""),
`name_regex` and `value_regex` searched, `states` all present, `window` searched in the name of the
top-level window the node is in. `no_node` passes when none matches. A `file` check reads the file,
relative to the desktop's home directory, through the guest: `exists` (true or false; the default
is true), `equals` or `contains` its text. The reward is the share of checks that pass, so a task
that is half done scores 0.5.
"""

from __future__ import annotations

import re
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS, VerifierError
from sandboxes.desktop.tree_text import DesktopTree, Node
from sandboxes.tree_checks import check_node_pattern
from schemas.records import Verification

KIND = "desktop_state"
_NODE_FIELDS = {"window", "role", "name", "value", "name_regex", "value_regex", "states"}
_FILE_FIELDS = {"file", "exists", "equals", "contains"}


def parse_checks(verifier: dict[str, Any]) -> list[dict[str, Any]]:
    """The verifier's checks, each validated; VerifierError names the first malformed one."""
    checks = verifier.get("checks")
    if not isinstance(checks, list) or not checks:
        raise VerifierError("a desktop_state verifier needs a non-empty list of 'checks'")
    for n, check in enumerate(checks):
        if not isinstance(check, dict):
            raise VerifierError(f"check {n} must be an object, got {check!r}")
        keys = set(check)
        if keys in ({"node"}, {"no_node"}):
            pattern = check.get("node", check.get("no_node"))
            check_node_pattern(pattern, _NODE_FIELDS, ("window", "name_regex", "value_regex"), f"check {n}")
        elif "file" in keys:
            if keys - _FILE_FIELDS or not isinstance(check["file"], str) or not check["file"]:
                raise VerifierError(f"check {n}: a file check uses only {sorted(_FILE_FIELDS)}")
        else:
            raise VerifierError(f"check {n} must have 'node', 'no_node' or 'file', got {sorted(keys)}")
    return checks


def needs_tree(checks: list[dict[str, Any]]) -> bool:
    return any("node" in c or "no_node" in c for c in checks)


def file_paths(checks: list[dict[str, Any]]) -> list[str]:
    return sorted({c["file"] for c in checks if "file" in c})


def _windows(tree: DesktopTree) -> list[tuple[Node, str]]:
    """Each node with the name of the top-level window it belongs to."""
    pairs, window = [], ""
    for node in tree.nodes:
        if node.depth == 0:
            window = node.name
        pairs.append((node, window))
    return pairs


def _matches(node: Node, window: str, pattern: dict[str, Any]) -> bool:
    value = node.value or ""
    return (
        ("role" not in pattern or node.role == pattern["role"])
        and ("name" not in pattern or node.name == pattern["name"])
        and ("value" not in pattern or value == pattern["value"])
        and ("name_regex" not in pattern or re.search(pattern["name_regex"], node.name) is not None)
        and ("value_regex" not in pattern or re.search(pattern["value_regex"], value) is not None)
        and set(pattern.get("states", [])) <= node.states
        and ("window" not in pattern or re.search(pattern["window"], window) is not None)
    )


def _node_check(pattern: dict[str, Any], tree: DesktopTree, wanted: bool) -> tuple[bool, str]:
    pairs = _windows(tree)
    found = [node for node, window in pairs if _matches(node, window, pattern)]
    if found:
        return (
            wanted,
            f"found [{found[0].id}] {found[0].role} {found[0].name!r} value={found[0].value or ''!r}",
        )
    # What was there instead: the nodes of the same role (and window), so a failure says what it saw.
    near = {k: v for k, v in pattern.items() if k in ("role", "window")}
    seen = [f"{n.role} {n.name!r} value={n.value or ''!r}" for n, w in pairs if _matches(n, w, near)]
    return not wanted, "no such node" + (f"; seen instead: {'; '.join(seen[:5])}" if seen else "")


def _file_check(check: dict[str, Any], files: dict[str, dict[str, Any]]) -> tuple[bool, str]:
    state = files.get(check["file"], {"exists": False, "text": ""})
    if not state["exists"]:
        return check.get("exists", True) is False, "the file does not exist"
    if check.get("exists", True) is False:
        return False, f"the file exists ({state['size']} bytes)"
    text = state["text"]
    shown = f"its text is {text[:200]!r}"
    if "equals" in check and text != check["equals"]:
        return False, shown
    if "contains" in check and check["contains"] not in text:
        return False, shown
    return True, shown


def evaluate(
    checks: list[dict[str, Any]], tree: DesktopTree | None, files: dict[str, dict[str, Any]]
) -> Verification:
    """The verification of `checks` against the tree and files read from the desktop."""
    results, lines = [], []
    for check in checks:
        if "file" in check:
            passed, seen = _file_check(check, files)
        else:
            assert tree is not None, "node checks need the tree"
            wanted = "node" in check
            passed, seen = _node_check(check["node" if wanted else "no_node"], tree, wanted)
        results.append({"check": check, "passed": passed, "seen": seen})
        lines.append(f"{'PASS' if passed else 'FAIL'} {check}: {seen}")
    passed_count = sum(r["passed"] for r in results)
    details = {"checks": results, "passed": passed_count, "total": len(checks)}
    if tree is not None:
        details["focused"] = tree.focused
    output = "\n".join(lines)[-VERIFIER_OUTPUT_CHARS:]
    return Verification(verifier=KIND, reward=passed_count / len(checks), output=output, details=details)

"""The tree domains' forms: one node a line, starting at depth 0 and nesting one level at a time.

- web (sandboxes/web): `URL:` and `Title:` header lines where the real page had a header, then node
  lines (`[bid] role 'name', properties`) indented by tabs, or the truncation marker `[... `;
- os (sandboxes/desktop): a `Focused:` line, then only node lines (and the truncation marker), read with
  the desktop sandbox's own parser; where the real turn was not in that form, the generic rule;
- android (sandboxes/android): a `Package:` line, then only node lines, read with the Android sandbox's
  parser; where the real turn was not in that form, the generic rule;
- generic: an XML tree parses with the real root tag; an indented tree nests by the real tree's step.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from sandboxes.android.tree_text import parse_tree as parse_android
from sandboxes.desktop.tree_text import parse_tree as parse_desktop
from training.observations.parsers import is_tree_node, parse_web
from training.observations.trees import is_android_text, is_desktop_text, nests_one_level_at_a_time
from training.rewards.verifiers.verdict import Failure

CHECKS = {
    "web.header": "the real page had URL and Title header lines and the prediction lacks them",
    "web.tree": "the real page showed a tree and the prediction shows none",
    "tree.node_lines": "lines that are not tree nodes (prose, or another format)",
    "tree.nesting": "the tree does not start at depth 0, or skips a level going down",
    "tree.xml": "an XML tree that does not parse, or has another root tag than the real one",
    "os.focused_line": "the desktop form's `Focused:` line is missing",
    "android.package_line": "the Android form's `Package:` line is missing",
}


def _nesting(depths: list[int]) -> list[Failure]:
    if nests_one_level_at_a_time(depths):
        return []
    return [Failure("tree.nesting", "the tree must start at depth 0 and go down one level a line")]


def _strangers(lines: list[str]) -> list[Failure]:
    if not lines:
        return []
    return [Failure("tree.node_lines", f"{len(lines)} line(s) not a node, first {lines[0].strip()[:50]!r}")]


def web_failures(prediction: str, reference: str) -> list[Failure]:
    real, predicted = parse_web(reference), parse_web(prediction)
    failures = []
    titled = any(line.startswith("Title:") for line in prediction.split("\n"))
    if real.has_header and not (predicted.url and titled):
        failures.append(Failure("web.header", "no `URL:` and `Title:` lines above the tree"))
    if not predicted.tree:
        return failures + ([Failure("web.tree", "no tree lines below the header")] if real.tree else [])
    depths = [len(line) - len(line.lstrip("\t")) for line in predicted.tree]
    failures += _nesting(depths)
    lines = [line for line in predicted.tree if not is_tree_node(line.lstrip("\t"))]
    return failures + _strangers([line for line in lines if not line.startswith("[... ")])


def tree_failures(prediction: str, reference: str) -> list[Failure]:
    """The generic rule: XML trees parse with the real root tag; indented trees nest one step a line."""
    if reference.lstrip().startswith("<"):
        try:
            if ET.fromstring(prediction).tag == ET.fromstring(reference).tag:
                return []
        except ET.ParseError as exc:
            return [Failure("tree.xml", f"the XML does not parse: {exc}")]
        return [Failure("tree.xml", "the root tag differs from the real tree's")]
    lines = [line for line in prediction.split("\n") if line.strip()]
    depths = [len(line) - len(line.lstrip(" ")) for line in lines]
    # The real tree's indentation step, else the prediction's own.
    real = [len(line) - len(line.lstrip(" ")) for line in reference.split("\n") if line.strip()]
    unit = min((d for d in real if d), default=0) or min((d for d in depths if d), default=1)
    if any(d % unit for d in depths):
        return [Failure("tree.nesting", f"indentation is not a multiple of the tree's step ({unit} spaces)")]
    return _nesting([d // unit for d in depths])


def os_failures(prediction: str, reference: str) -> list[Failure]:
    if not is_desktop_text(reference):
        return tree_failures(prediction, reference)
    tree = parse_desktop(prediction)
    failures = [] if tree.has_focused_line else [Failure("os.focused_line", "no `Focused:` line")]
    return failures + _strangers(tree.other_lines) + _nesting([n.depth for n in tree.nodes])


def android_failures(prediction: str, reference: str) -> list[Failure]:
    if not is_android_text(reference):
        return tree_failures(prediction, reference)
    tree = parse_android(prediction)
    failures = [] if tree.has_head else [Failure("android.package_line", "no `Package: ... Activity:` line")]
    return failures + _strangers(tree.other_lines) + _nesting([n.depth for n in tree.nodes])

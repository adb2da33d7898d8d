"""The accessibility-tree observations (android's `android_ui_tree`, os's `desktop_a11y_tree`) read
back into the parts a sandbox's `data` holds, and the checks of their form that the rule verifiers
and the fidelity metrics share. The text itself is read with each sandbox's own parser
(sandboxes/<domain>/tree_text.py), the one reader of each form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandboxes.android import tree_text as android_text
from sandboxes.desktop import tree_text as desktop_text


def _size_and_error(tree: android_text.AndroidTree | desktop_text.DesktopTree) -> dict[str, Any]:
    """The part of `data` both tree forms carry alike: how many nodes (shown and cut), the cut, the error."""
    return {"nodes": len(tree.nodes) + tree.more, "truncated": tree.truncated, "error": tree.error}


def android_data(text: str) -> dict[str, Any]:
    """The Android sandbox's `data` as far as the text carries it."""
    tree = android_text.parse_tree(text)
    return {
        "package": tree.package or "unknown",
        "activity": tree.activity or "unknown",
        **_size_and_error(tree),
    }


def is_android_text(text: str) -> bool:
    """Whether a text is in the Android form at all (a recorded runner error, say, is not)."""
    return android_text.parse_tree(text).has_head


def desktop_data(text: str) -> dict[str, Any]:
    """The parts of the desktop sandbox's `data` that the text carries (not `backend`)."""
    tree = desktop_text.parse_tree(text)
    return {"focused": tree.focused or "none", **_size_and_error(tree)}


def is_desktop_text(text: str) -> bool:
    """Whether a text is in the desktop form at all (a recorded runner error, say, is not)."""
    return desktop_text.parse_tree(text).has_focused_line


def nests_one_level_at_a_time(depths: Sequence[int]) -> bool:
    """A tree written one node a line: it starts at depth 0 and goes down at most one level a line."""
    if depths and depths[0] != 0:
        return False
    return all(b - a <= 1 for a, b in zip(depths, depths[1:], strict=False))

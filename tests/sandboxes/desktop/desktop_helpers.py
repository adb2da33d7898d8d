"""Test helpers for desktop sandboxes: read the observation's tree lines, find guest processes."""

from __future__ import annotations

import os

from sandboxes.checks import descendants
from sandboxes.desktop.tree_text import Node, parse_tree


def tree_nodes(text: str) -> list[Node]:
    """Every node line of an observation's text; a line in no known shape, or a node without a box,
    fails the test."""
    tree = parse_tree(text)
    assert tree.other_lines == [], f"tree lines not in the desktop_a11y_tree format: {tree.other_lines!r}"
    unplaced = [node for node in tree.nodes if node.box is None]
    assert unplaced == [], f"tree nodes without a box: {unplaced!r}"
    return tree.nodes


def find_node(text: str, role: str, name: str = "", prefix: bool = False) -> Node:
    for node in tree_nodes(text):
        if node.role == role and (node.name.startswith(name) if prefix else node.name == name):
            return node
    raise AssertionError(f"no {role} {name!r} in the tree:\n{text}")


def command_line(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
    except OSError:
        return []


def guest_processes(root_pid: int, program: str) -> list[int]:
    """Processes below `root_pid` running `program` (its base name, or a script argument)."""
    return [
        pid
        for pid in descendants(root_pid)
        if any(os.path.basename(part) == program for part in command_line(pid)[:2])
    ]

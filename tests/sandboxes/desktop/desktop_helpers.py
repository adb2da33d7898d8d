"""Test helpers for desktop sandboxes: read the observation's tree lines, find guest processes."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

_LINE = re.compile(
    r'^(?P<indent>\s*)\[(?P<id>\d+)\] (?P<role>.+?) "(?P<name>(?:[^"\\]|\\.)*)"'
    r'(?: value="(?P<value>(?:[^"\\]|\\.)*)")?(?: states=(?P<states>\S+))?'
    r" @\((?P<x>-?\d+),(?P<y>-?\d+) (?P<w>\d+)x(?P<h>\d+)\)$"
)


@dataclass
class TreeNode:
    id: int
    depth: int
    role: str
    name: str
    value: str
    states: list[str]
    x: int
    y: int
    w: int
    h: int

    @property
    def centre(self) -> tuple[int, int]:
        return self.x + self.w // 2, self.y + self.h // 2


def tree_nodes(text: str) -> list[TreeNode]:
    """Every node line of an observation's text; a line in no known shape fails the test."""
    nodes = []
    for line in text.splitlines():
        if line.startswith(("Focused: ", "Error: ", "[... ")):
            continue
        match = _LINE.match(line)
        assert match, f"tree line not in the desktop_a11y_tree format: {line!r}"
        nodes.append(
            TreeNode(
                id=int(match["id"]),
                depth=len(match["indent"]) // 2,
                role=match["role"],
                name=match["name"],
                value=match["value"] or "",
                states=match["states"].split(",") if match["states"] else [],
                x=int(match["x"]),
                y=int(match["y"]),
                w=int(match["w"]),
                h=int(match["h"]),
            )
        )
    return nodes


def find_node(text: str, role: str, name: str = "", prefix: bool = False) -> TreeNode:
    for node in tree_nodes(text):
        if node.role == role and (node.name.startswith(name) if prefix else node.name == name):
            return node
    raise AssertionError(f"no {role} {name!r} in the tree:\n{text}")


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        todo += children
    return found


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

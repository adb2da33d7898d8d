"""The `desktop_a11y_tree` text (the form sandboxes/desktop/tree_text.py reads back): an optional
`Error:` line, a `Focused:` line, then one node a line, indented two spaces per depth and numbered
in walk order,

    [<id>] <role> "<name>"[ value="<text>"][ states=<comma list>] @(<x>,<y> <w>x<h>)

and `[... <n> more nodes not shown]` when the tree was cut at `max_nodes`."""

from __future__ import annotations

from a11y import WALK_LIMIT, Node

STATES = ("active", "focused", "selected", "checked", "pressed", "expanded", "editable", "indeterminate")
LAYOUT_ROLES = ("panel", "filler")  # unnamed, textless ones only group others: not listed


def node_line(depth: int, role: str, name: str, value: str, states: list[str], box: tuple) -> str:
    """One node's line, indented but not yet numbered."""
    line = f'{"  " * depth}{role} "{_quote(name)}"'
    if value:
        line += f' value="{_quote(value)}"'
    if states:
        line += f" states={','.join(states)}"
    return line + f" @({box[0]},{box[1]} {box[2]}x{box[3]})"


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def emit_lines(node: Node, depth: int, offset: tuple[int, int], lines: list[str]) -> None:
    """Depth-first lines of the listed nodes; unnamed layout nodes give their depth to their children."""
    if len(lines) >= WALK_LIMIT:
        return
    states = [st for st in STATES if st in node.states]
    if node.listed and not (node.role in LAYOUT_ROLES and not node.name and not node.value and not states):
        x, y, w, h = node.box
        lines.append(
            node_line(depth, node.role, node.name, node.value, states, (x + offset[0], y + offset[1], w, h))
        )
        depth += 1
    for child in node.children:
        emit_lines(child, depth, offset, lines)


def tree_text(lines: list[str], focused: str, errors: list[str], max_nodes: int) -> str:
    """The observation's text: the head lines, then the first `max_nodes` node lines numbered."""
    shown = lines[:max_nodes]
    numbered = [
        f"{line[: len(line) - len(line.lstrip())]}[{i}] {line.lstrip()}" for i, line in enumerate(shown)
    ]
    if len(lines) > max_nodes:
        numbered.append(f"[... {len(lines) - max_nodes} more nodes not shown]")
    head = ([f"Error: {'; '.join(errors)}"] if errors else []) + [f"Focused: {focused}"]
    return "\n".join(head + numbered)

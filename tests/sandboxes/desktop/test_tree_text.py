"""The desktop observation text read back into nodes (sandboxes/desktop/tree_text.py): pure logic."""

from __future__ import annotations

from sandboxes.desktop.tree_text import parse_node, parse_tree

# In the guest program's form (sandboxes/desktop/guest/tree_format.py): GTK roles with spaces, escaped
# quotes and newlines in values, an xterm window without a tree, the truncation marker.
SCREEN = r"""Error: nothing at (900, 700): no window there, only the empty desktop
Focused: gnome-calculator — Calculator
[0] frame "Calculator" states=active @(0,0 360x616)
  [1] text "" value="7+6 \"x\"\nnext" states=editable,focused @(12,60 336x40)
  [2] push button "7" @(12,300 80x50)
  [3] toggle button "Mode" states=checked @(200,8 60x30)
[4] frame "agent@desktop: ~" value="no accessibility tree: this program shows only its window" @(4,0 4x3)
[... 31 more nodes not shown]"""


def test_every_part_of_the_text_is_read() -> None:
    tree = parse_tree(SCREEN)
    assert tree.error == "nothing at (900, 700): no window there, only the empty desktop"
    assert tree.focused == "gnome-calculator — Calculator" and tree.focused_application == "gnome-calculator"
    assert [n.id for n in tree.nodes] == ["0", "1", "2", "3", "4"]
    assert [n.depth for n in tree.nodes] == [0, 1, 1, 1, 0]
    assert [n.role for n in tree.nodes] == ["frame", "text", "push button", "toggle button", "frame"]
    text = tree.nodes[1]
    assert text.value == '7+6 "x"\nnext' and text.states == {"editable", "focused"}
    assert text.box == (12, 60, 336, 40) and text.centre == (180, 80)
    assert tree.nodes[2].value is None and tree.nodes[2].states == frozenset()
    assert tree.more == 31 and tree.truncated and tree.other_lines == []


def test_points_find_the_deepest_node() -> None:
    tree = parse_tree(SCREEN)
    assert tree.node_at(20, 310).name == "7"
    assert tree.node_at(5, 5).role == "frame"
    assert tree.node_at(900, 700) is None


def test_focused_none_and_lines_of_no_known_form() -> None:
    tree = parse_tree("Focused: none\nThe screen is empty.\n")
    assert tree.has_focused_line and tree.focused == "" and tree.nodes == []
    assert tree.other_lines == ["The screen is empty."] and not tree.truncated
    assert parse_tree("").has_focused_line is False


def test_node_lines_without_a_box_or_with_negative_coordinates() -> None:
    node = parse_node('    [12] menu item "Quit"')
    assert node is not None and node.depth == 2 and node.box is None and node.centre is None
    moved = parse_node('[3] dialog "Save As" @(-10,-4 300x200)')
    assert moved is not None and moved.box == (-10, -4, 300, 200) and moved.contains(0, 0)
    assert parse_node("RootWebArea 'Shop', focused") is None  # the web form is not the desktop's

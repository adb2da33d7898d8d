"""The ARIA snapshot -> BrowserGym-style tree rendering, on snapshot text in Playwright's format."""

from __future__ import annotations

from sandboxes.web.tree import parse_snapshot, render_tree

SNAPSHOT = """- generic [ref=f1e1]:
  - navigation "Main" [ref=f1e2]:
    - link "Cart (2)" [ref=f1e3] [cursor=pointer]:
      - /url: /cart
  - 'heading "Sizes: S, M" [level=2] [ref=f1e4]'
  - textbox "Email" [active] [ref=f1e5]: alice@example.com
  - combobox "Colour" [ref=f1e6]:
    - option "Red"
    - option "Blue" [selected]
  - checkbox "It's \\"fine\\"" [checked] [ref=f1e7]
  - button "Gone" [disabled] [ref=f1e8]
  - paragraph [ref=f1e9]: "Price: $4"
  - text: plain words
  - generic [ref=f1e10] [cursor=pointer]: clickable div
  - iframe [ref=f1e11]:
    - button "Inside" [ref=f2e1]
"""


def test_tree_lines_follow_browsergym_conventions() -> None:
    tree = render_tree(SNAPSHOT, "Shop")
    lines = tree.text.splitlines()
    assert lines[0] == "RootWebArea 'Shop'"  # not focused: the textbox has the focus
    assert "\t[2] navigation 'Main'" in lines
    assert "\t\t[3] link 'Cart (2)', url='/cart'" in lines
    assert "\t[4] heading 'Sizes: S, M', level=2" in lines
    assert "\t[5] textbox 'Email', focused, value='alice@example.com'" in lines
    assert "\t[7] checkbox 'It\\'s \"fine\"', checked" in lines
    assert "\t[8] button 'Gone', disabled" in lines
    assert "\t\tStaticText 'Price: $4'" in lines
    assert "\tStaticText 'plain words'" in lines
    assert "\t[10] generic, clickable" in lines
    assert "\t\t[f2e1] button 'Inside'" in lines  # iframe refs keep their frame prefix
    assert tree.focused_bid == "5"
    assert tree.refs["5"] == "f1e5" and tree.refs["f2e1"] == "f2e1"


def test_elements_list_actionable_enabled_nodes_with_select_options() -> None:
    tree = render_tree(SNAPSHOT, "Shop")
    by_bid = {e["bid"]: e for e in tree.elements}
    assert by_bid["5"]["editable"] is True
    assert by_bid["6"] == {
        "bid": "6",
        "role": "combobox",
        "name": "Colour",
        "editable": False,
        "options": ["Red", "Blue"],
    }
    assert "8" not in by_bid  # disabled
    assert "2" not in by_bid  # a navigation landmark is not an action target
    assert by_bid["10"]["role"] == "generic"


def test_plain_wrappers_are_flattened_and_body_focus_means_none() -> None:
    snapshot = '- generic [active] [ref=e1]:\n  - generic [ref=e2]:\n    - button "Go" [ref=e3]\n'
    tree = render_tree(snapshot, "T")
    assert tree.text.splitlines() == ["RootWebArea 'T', focused", "\t[3] button 'Go'"]
    assert tree.focused_bid == ""


def test_long_trees_are_truncated_with_a_marker() -> None:
    snapshot = "\n".join(f'- link "item {i}" [ref=e{i + 1}]' for i in range(50))
    tree = render_tree(snapshot, "Long", max_lines=10)
    lines = tree.text.splitlines()
    assert len(lines) == 12
    assert lines[-1].startswith("[... 40 more nodes truncated")
    assert tree.node_count == 50


def test_parse_keeps_nesting() -> None:
    roots = parse_snapshot(SNAPSHOT)
    assert len(roots) == 1 and roots[0].children[0].children[0].url == "/cart"

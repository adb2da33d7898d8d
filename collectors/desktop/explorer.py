"""The embedded default desktop policy: seeded random walks over the accessibility tree's nodes.

Each step parses the observation text (sandboxes/desktop/tree_text.py) and weighs the moves that make
sense on this screen: click an actionable node at the centre of its box, type into an editable one
(clicking it first when it has no focus), press a keyboard shortcut of the focused application,
scroll, hover, drag, answer a dialog, open an application from a focused terminal or close the
focused one. A share of the steps is deliberately wrong, as agents are: a click where nothing is,
a click off the screen, a misspelt pyautogui call, code that does not parse. Valid moves are sent
as structured computer actions or, as often, as the pyautogui code they stand for (both are the OS
action space). Every choice comes from the rng given at reset, so a seed and the same screens give
the same walk.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from collectors.desktop.vocabulary import CLOSE_KEYS, FILE_NAMES, PROGRAMS, SHORTCUTS, logical_app, text_for
from collectors.policies.base import invalid_action
from collectors.policies.tree_walk import Move, TreeWalk, WalkState
from sandboxes.base import InvalidActionError
from sandboxes.desktop.tree_text import DesktopTree, Node, parse_tree
from schemas.records import Action

CLICKABLE = {
    "push button", "toggle button", "menu item", "check menu item", "radio menu item", "menu",
    "check box", "radio button", "page tab", "link", "combo box", "list item", "table cell",
    "tree item", "spin button", "button", "icon",
}  # fmt: skip
DIALOGS = {"dialog", "alert", "file chooser", "color chooser", "font chooser"}
EDITABLE_ROLES = {"text", "entry", "password text", "terminal", "document text", "paragraph", "editbar"}
# States that say a node accepts input; a tree that prints them at all prints them on every such node.
_ENABLED = {"enabled", "sensitive"}
# Title-bar buttons GTK 4 draws inside the window (and so inside the tree). Close ends the application
# and a minimised window cannot come back without a task bar: they get their own, rarer moves.
_WINDOW_CONTROLS = {"close", "minimize", "minimise", "maximize", "maximise", "restore", "unmaximize"}


@dataclass(eq=False)
class DesktopExplorer(TreeWalk[DesktopTree]):
    name = "desktop-explorer"
    pyautogui_share: float = 0.5  # valid computer moves sent as the pyautogui code they stand for

    known_apps = PROGRAMS
    parse_tree = staticmethod(parse_tree)

    @staticmethod
    def shows_screen(tree: DesktopTree) -> bool:
        return tree.has_focused_line

    def nothing_left(self, tree: DesktopTree, state: WalkState[DesktopTree]) -> bool:
        return not tree.nodes and not tree.focused and state.steps > 1  # every window is gone

    def _candidates(self, tree: DesktopTree) -> list[tuple[float, Callable[[], Move]]]:
        state = self.state
        assert state is not None
        rng = state.rng
        app = logical_app(tree.focused_application) or logical_app(tree.focused)
        placed = [n for n in tree.nodes if n.box is not None and n.box[2] > 0 and n.box[3] > 0]
        enabled_known = any(_ENABLED & n.states for n in placed)
        usable = [n for n in placed if not enabled_known or _ENABLED & n.states]
        dialog = _dialog_nodes(tree)
        controls = [n for n in usable if n.role in CLICKABLE and n.name.lower() in _WINDOW_CONTROLS]
        clickable = [n for n in (dialog or usable) if n.role in CLICKABLE and n not in controls]
        editable = [n for n in (dialog or usable) if _editable(n)]
        keys = SHORTCUTS.get(app, ()) + SHORTCUTS[""]
        moves: list[tuple[float, Callable[[], Move]]] = [
            (1.5, lambda: _hotkey(rng.choice(keys))),
            (0.1, lambda: ("computer", {"action": "wait", "seconds": rng.choice((0.2, 0.5, 1.0))})),
        ]
        if clickable:
            moves.append((8.0 if dialog else 6.0, lambda: _click(rng.choice(clickable), rng)))
        if editable:
            moves.append(
                (6.0 if dialog else 4.0, lambda: self._type_into(rng.choice(editable), app, bool(dialog)))
            )
        if app == "terminal":  # xterm shows no tree: it is typed into blind, as a user would
            moves.append((4.0, lambda: _type(text_for("terminal", rng) + "\n")))
        if placed:
            moves.append((0.5, lambda: _scroll(rng.choice(placed), rng)))
            moves.append((0.4, lambda: _move(rng.choice(placed))))
        if editable and app == "editor":
            moves.append((0.3, lambda: _drag_select(rng.choice(editable))))
        missing = [a for a in PROGRAMS if a not in state.apps]
        if app == "terminal" and missing:
            moves.append((1.0, lambda: self._open(rng.choice(missing))))
        elif "terminal" in state.apps and app != "terminal":
            moves.append((0.4, lambda: _hotkey(("alt", "tab"))))
        resize = [n for n in controls if not n.name.lower().startswith(("close", "minimi"))]
        if resize:
            moves.append((0.2, lambda: _click(rng.choice(resize), rng, plain=True)))
        if state.steps > self.min_steps and app:
            moves.append((0.4, lambda: self._close(app, controls)))
        return moves

    def _type_into(self, node: Node, app: str, in_dialog: bool = False) -> Move:
        """Click the field unless it has the focus, type, and press Enter where that submits: a
        dialog's field (a file chooser's name, mostly) gets a file name, the calculator an expression."""
        state = self.state
        assert state is not None
        text = state.rng.choice(FILE_NAMES) if in_dialog else text_for(app or "editor", state.rng)
        sequence = [] if "focused" in node.states else [_click(node, state.rng, plain=True)]
        sequence.append(_type(text))
        if in_dialog or app == "calculator":  # submit the file name, compute the expression
            sequence.append(_hotkey(("enter",)))
        state.pending.extend(sequence[1:])
        return sequence[0]

    def _open(self, app: str) -> Move:
        """From a focused terminal, start another application in the background."""
        assert self.state is not None
        self.state.apps.append(app)
        return _type(f"{PROGRAMS[app]} &\n")

    def _close(self, app: str, controls: list[Node]) -> Move:
        """Quit the focused application: `exit` in a terminal, else its quit key, the window
        manager's close key, or the window's own Close button where the tree shows one."""
        state = self.state
        assert state is not None
        if app in state.apps:
            state.apps.remove(app)
        if app == "terminal":
            return _type("exit\n")
        buttons = [n for n in controls if n.name.lower() == "close"]
        if buttons and state.rng.random() < 0.4:
            return _click(buttons[0], state.rng, plain=True)
        return _hotkey(state.rng.choice(CLOSE_KEYS))

    def _invalid(self, tree: DesktopTree) -> Action:
        """A move an agent gets wrong: the recording then shows the error the agent would see."""
        state = self.state
        assert state is not None
        rng = state.rng
        width, height = _screen_extent(tree)
        kind = rng.choice(("empty", "off_screen", "misspelt", "syntax"))
        if kind == "empty":
            x, y = _empty_point(tree, rng, width, height)
            return self._action(("computer", {"action": "click", "x": x, "y": y}))
        if kind == "off_screen":
            # Far right of any screen the sandbox makes (its width is not in the observation).
            return self._action(("computer", {"action": "click", "x": rng.randint(5000, 9000), "y": 10}))
        x, y = rng.randrange(width), rng.randrange(height)
        if kind == "misspelt":
            return self._action(("pyautogui", {"code": f"pyautogui.clik(x={x}, y={y})"}))
        return self._action(("pyautogui", {"code": f"pyautogui.click(x={x}, y={y}"}))

    def _action(self, move: Move) -> Action:
        """The move as an Action; a valid computer move is sent as its pyautogui code half the time.
        A move the parser refuses goes to the runner as an `invalid` action with the parser's reason."""
        assert self.state is not None
        kind, arguments = move
        try:
            action = self.parse_action(kind, arguments)
            if kind == "computer" and self.state.rng.random() < self.pyautogui_share:
                action = self.parse_action("pyautogui", {"code": action.text})
        except InvalidActionError as exc:
            return invalid_action(str(arguments.get("code", arguments)), str(exc))
        return action


def _dialog_nodes(tree: DesktopTree) -> list[Node]:
    """The nodes of the last dialog in the tree (a modal one takes the input), or []."""
    start = max((i for i, n in enumerate(tree.nodes) if n.role in DIALOGS), default=-1)
    if start < 0:
        return []
    depth = tree.nodes[start].depth
    inside = []
    for node in tree.nodes[start + 1 :]:
        if node.depth <= depth:
            break
        if node.box is not None and node.box[2] > 0 and node.box[3] > 0:
            inside.append(node)
    return inside


def _editable(node: Node) -> bool:
    return "editable" in node.states or (node.role in EDITABLE_ROLES and not node.states)


def _screen_extent(tree: DesktopTree) -> tuple[int, int]:
    """The screen size the boxes reach (at least 640x480), for points on and off the screen."""
    boxes = [n.box for n in tree.nodes if n.box is not None]
    width = max([x + w for x, _, w, _ in boxes], default=0)
    height = max([y + h for _, y, _, h in boxes], default=0)
    return max(width, 640), max(height, 480)


def _empty_point(tree: DesktopTree, rng: random.Random, width: int, height: int) -> tuple[int, int]:
    """A point on the screen that no node covers (the desktop behind the windows), if one is found."""
    for _ in range(50):
        x, y = rng.randrange(width), rng.randrange(height)
        if tree.node_at(x, y) is None:
            return x, y
    return width - 1, height - 1


def _click(node: Node, rng: random.Random, plain: bool = False) -> Move:
    assert node.centre is not None
    x, y = node.centre
    draw = 1.0 if plain else rng.random()
    action = "double_click" if draw < 0.06 else "right_click" if draw < 0.1 else "click"
    return "computer", {"action": action, "x": x, "y": y}


def _type(text: str) -> Move:
    return "computer", {"action": "type", "text": text}


def _hotkey(keys: tuple[str, ...]) -> Move:
    if len(keys) == 1:
        return "computer", {"action": "press", "key": keys[0]}
    return "computer", {"action": "hotkey", "keys": list(keys)}


def _scroll(node: Node, rng: random.Random) -> Move:
    assert node.centre is not None
    x, y = node.centre
    return "computer", {"action": "scroll", "x": x, "y": y, "clicks": rng.choice((-5, -3, 3, 5))}


def _move(node: Node) -> Move:
    assert node.centre is not None
    x, y = node.centre
    return "computer", {"action": "move", "x": x, "y": y}


def _drag_select(node: Node) -> Move:
    """Select text by dragging across the top line of an editable node."""
    assert node.box is not None
    x, y, w, h = node.box
    line = y + min(h // 2, 10)
    return "computer", {"action": "drag", "x": x + 2, "y": line, "to_x": x + max(w // 2, 3), "to_y": line}

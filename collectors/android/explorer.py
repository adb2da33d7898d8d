"""The embedded default Android policy: a seeded, monkey-like walk over the UI tree's nodes.

Each step parses the observation text (sandboxes/android/tree_text.py) and weighs the moves that make
sense on this screen: tap a clickable node (by its `[index]`, or at its centre by coordinates, as
agents do both), long-press a long-clickable one, type into an editable one (sometimes pressing
Enter after), scroll a scrollable one or the screen, swipe, go back, go home and reopen the task's
app, open another app of the task, wait. A walk that left the task's apps goes back more often.
A share of the steps is deliberately wrong, as agents are: an index that is not on the screen, a tap
off the screen, a scroll in no direction, an app no phone has, an action with an argument missing.
Every choice comes from the rng given at reset, so a seed and the same screens give the same walk.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass

from collectors.android.vocabulary import APP_NAMES, MISSING_APPS, package_app, text_for
from collectors.policies.base import invalid_action
from collectors.policies.tree_walk import Move, TreeWalk
from sandboxes.android.tree_text import AndroidTree, Node, parse_tree
from sandboxes.base import InvalidActionError
from schemas.records import Action

DIRECTIONS = ("up", "down", "left", "right")


@dataclass(eq=False)
class AndroidExplorer(TreeWalk[AndroidTree]):
    name = "android-explorer"
    coordinate_share: float = 0.2  # taps at a node's centre instead of by its index

    known_apps = APP_NAMES
    parse_tree = staticmethod(parse_tree)

    @staticmethod
    def shows_screen(tree: AndroidTree) -> bool:
        return tree.has_head

    def _candidates(self, tree: AndroidTree) -> list[tuple[float, Callable[[], Move]]]:
        state = self.state
        assert state is not None
        rng = state.rng
        usable = [n for n in tree.nodes if n.visible and n.enabled]
        clickable = [n for n in usable if "clickable" in n.flags and "editable" not in n.flags]
        long_clickable = [n for n in usable if "long-clickable" in n.flags]
        editable = [n for n in usable if "editable" in n.flags]
        scrollable = [n for n in usable if "scrollable" in n.flags]
        app = package_app(tree.package)
        away = bool(state.apps) and tree.has_head and app not in state.apps
        moves: list[tuple[float, Callable[[], Move]]] = [
            (2.5 if away else 0.8, lambda: ("navigate_back", {})),
            (0.1, lambda: ("wait", {"seconds": rng.choice((1, 2))})),
            (0.2, lambda: _swipe(tree, rng)),
            (0.5, lambda: ("scroll", {"direction": rng.choice(DIRECTIONS[:2])})),
        ]
        if clickable:
            moves.append((6.0, lambda: self._tap(rng.choice(clickable))))
        if long_clickable:
            moves.append((0.5, lambda: self._tap(rng.choice(long_clickable), "long_press")))
        if editable:
            moves.append((4.0, lambda: self._type_into(rng.choice(editable), app)))
        if scrollable:
            moves.append((1.2, lambda: _scroll(rng.choice(scrollable), rng)))
        if state.apps:
            moves.append((0.15, lambda: self._home_and_back()))
            moves.append((1.5 if away else 0.2, lambda: _open(rng.choice(state.apps))))
        return moves

    def _tap(self, node: Node, kind: str = "click") -> Move:
        state = self.state
        assert state is not None
        if state.rng.random() < self.coordinate_share:
            x, y = node.centre
            return kind, {"x": x, "y": y}
        return kind, {"index": node.index}

    def _type_into(self, node: Node, app: str) -> Move:
        """Type into the node by its index (the sandbox focuses it first); Enter after a search or a
        one-line field now and then, as a user submits."""
        state = self.state
        assert state is not None
        text = text_for(app, f"{node.text} {node.desc} {node.rid}", state.rng)
        if state.rng.random() < 0.3:
            state.pending.append(("keyboard_enter", {}))
        return "input_text", {"text": text, "index": node.index}

    def _home_and_back(self) -> Move:
        state = self.state
        assert state is not None
        state.pending.append(_open(state.apps[0]))
        return "navigate_home", {}

    def _invalid(self, tree: AndroidTree) -> Action:
        """A move an agent gets wrong: the recording then shows the error the agent would see
        (from the sandbox, or the parser's refusal recorded by the runner)."""
        state = self.state
        assert state is not None
        rng = state.rng
        width, height = tree.screen
        kind = rng.choice(("index", "index", "off_screen", "direction", "missing", "app"))
        if kind == "index":  # an index past the last node of this screen
            last = max((n.index for n in tree.nodes), default=0) + tree.more
            return self._action(("click", {"index": last + rng.randint(1, 40)}))
        if kind == "off_screen":
            return self._action(("click", {"x": width + rng.randint(10, 500), "y": rng.randrange(height)}))
        if kind == "direction":
            return self._action(("scroll", {"direction": rng.choice(("diagonal", "upward", "sideways"))}))
        if kind == "missing":
            return self._action(("input_text", {"index": rng.randint(0, 5)}))
        return self._action(("open_app", {"app_name": rng.choice(MISSING_APPS)}))

    def _action(self, move: Move) -> Action:
        """The move as an Action; a move the parser refuses goes to the runner as an `invalid`
        action carrying the canonical JSON the agent wrote and the parser's reason."""
        kind, arguments = move
        try:
            return self.parse_action(kind, arguments)
        except InvalidActionError as exc:
            return invalid_action(_json_text(kind, arguments), str(exc))


def _json_text(kind: str, arguments: dict) -> str:
    return json.dumps({"action_type": kind, **arguments}, ensure_ascii=False)


def _scroll(node: Node, rng: random.Random) -> Move:
    return "scroll", {"direction": rng.choice(DIRECTIONS), "index": node.index}


def _swipe(tree: AndroidTree, rng: random.Random) -> Move:
    """A vertical or horizontal swipe across the middle of the screen."""
    width, height = tree.screen
    cx, cy = width // 2, height // 2
    if rng.random() < 0.5:
        dy = height // 4 * rng.choice((-1, 1))
        return "swipe", {"x": cx, "y": cy - dy, "to_x": cx, "to_y": cy + dy}
    dx = width // 4 * rng.choice((-1, 1))
    return "swipe", {"x": cx - dx, "y": cy, "to_x": cx + dx, "to_y": cy}


def _open(app: str) -> Move:
    return "open_app", {"app_name": APP_NAMES.get(app, app)}

"""The desktop (os) domain's fidelity metrics (pure); the simulator reads the same form in
training/observations/trees.py.

A `desktop_a11y_tree` observation is `Error:` (when the action failed) and `Focused:` lines, then
one accessibility node a line, `[id] role "name" value="..." states=... @(x,y wxh)`, and maybe a
truncation marker. The text is read with the desktop sandbox's parser (sandboxes/desktop/tree_text.py),
the one reader of this form, so the explorer, the simulator and the metrics agree on it.

Metrics, each scored against the recorded text:
- `node_f1`: multiset F1 of the nodes as (role, name, value), ignoring the ids (they number the walk,
  so one extra node renumbers all that follow) and the positions (a window placed a few pixels
  away shows the same content);
- `node_state_f1`: the same with the states (focused, checked, ...) as part of each node;
- `position_within_tolerance`: of the real nodes that the prediction holds (matched by (role, name,
  value), in walk order), the share whose box is within `POSITION_TOLERANCE_PX` on every edge;
  None when the real turn has no placed node;
- `focused_match`: the `Focused:` line's value is the same; `error_match`: both report an error or
  both do not; a prediction without a `Focused:` line matches neither; None where the real text
  is not in the desktop form (the runner's answer to an action that never ran).
"""

from __future__ import annotations

from sandboxes.desktop.tree_text import DesktopTree, Node, parse_tree
from training.fidelity.overlap import multiset_f1
from training.fidelity.tree_metrics import share_placed_close

OBSERVATION_FORMAT = "desktop_a11y_tree"
POSITION_TOLERANCE_PX = 8
DESKTOP_METRICS = ("node_f1", "node_state_f1", "position_within_tolerance", "focused_match", "error_match")


def _state_key(node: Node) -> tuple[str, str, str, tuple[str, ...]]:
    return (*node.key(), tuple(sorted(node.states)))


def _within(a: tuple[int, int, int, int], b: tuple[int, int, int, int], tolerance: int) -> bool:
    """Every edge of box `a` within `tolerance` pixels of the same edge of `b`."""
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    edges = (ax - bx, ay - by, ax + aw - bx - bw, ay + ah - by - bh)
    return all(abs(d) <= tolerance for d in edges)


def position_share(
    predicted: DesktopTree, real: DesktopTree, tolerance: int = POSITION_TOLERANCE_PX
) -> float | None:
    """Of the real placed nodes the prediction holds, the share placed within `tolerance`; nodes of
    one (role, name, value) are paired in walk order. None when the real tree places no node."""
    return share_placed_close(
        [(n.key(), n.box) for n in predicted.nodes if n.box is not None],
        [(n.key(), n.box) for n in real.nodes if n.box is not None],
        lambda a, b: _within(a, b, tolerance),
    )


def desktop_scores(prediction: str, reference: str) -> dict[str, float | None]:
    pred, real = parse_tree(prediction), parse_tree(reference)
    scores: dict[str, float | None] = {
        "node_f1": multiset_f1([n.key() for n in pred.nodes], [n.key() for n in real.nodes]),
        "node_state_f1": multiset_f1(
            [_state_key(n) for n in pred.nodes], [_state_key(n) for n in real.nodes]
        ),
        "position_within_tolerance": position_share(pred, real),
        "focused_match": None,
        "error_match": None,
    }
    if real.has_focused_line:  # a runner's text (an action that never ran) has neither part
        form = pred.has_focused_line  # a reply not in the desktop form matches neither
        scores["focused_match"] = float(form and pred.focused == real.focused)
        scores["error_match"] = float(form and bool(pred.error) == bool(real.error))
    return scores

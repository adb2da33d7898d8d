"""The Android domain's fidelity metrics (pure); the simulator reads the same form in
training/observations/trees.py.

An `android_ui_tree` observation is an `Error:` line (when the action failed), a
`Package: <package>  Activity: <activity>` line, then one UI node a line,
`[index] class "text" desc="..." id=... @(x1,y1,x2,y2) flags`, and maybe a truncation marker. The
text is read with the Android sandbox's parser (sandboxes/android/tree_text.py), the one reader of
this form, so the explorer, the simulator and the metrics agree on it.

Metrics, each scored against the recorded text:
- `node_f1`: multiset F1 of the nodes as (class, text, content description, resource id), ignoring
  the indexes (they number the nodes shown, so one extra node renumbers all that follow) and the
  bounds (a list scrolled a few pixels shows the same content);
- `node_flag_f1`: the same with the flags (clickable, focused, checked, ...) as part of each node;
- `position_within_tolerance`: of the real nodes that the prediction holds (matched by their
  identity above, in order), the share whose bounds are within `POSITION_TOLERANCE_PX` on every
  edge; None when the real turn shows no node;
- `package_match`, `activity_match`: the `Package:` line's parts are the same; `error_match`: both
  report an error or both do not; a prediction without the `Package:` line matches none of them;
  None where the real text is not in the Android form (the runner's answer to an action that never ran).
"""

from __future__ import annotations

from sandboxes.android.tree_text import AndroidTree, Node, parse_tree
from training.fidelity.overlap import multiset_f1
from training.fidelity.tree_metrics import share_placed_close

OBSERVATION_FORMAT = "android_ui_tree"
POSITION_TOLERANCE_PX = 16  # a phone screen is ~1080 px wide: 1.5 % of it
ANDROID_METRICS = (
    "node_f1", "node_flag_f1", "position_within_tolerance", "package_match", "activity_match", "error_match",
)  # fmt: skip


def _flag_key(node: Node) -> tuple[str, str, str, str, tuple[str, ...]]:
    return (*node.key(), tuple(sorted(node.flags)))


def position_share(
    predicted: AndroidTree, real: AndroidTree, tolerance: int = POSITION_TOLERANCE_PX
) -> float | None:
    """Of the real nodes the prediction holds, the share placed within `tolerance` on every edge;
    nodes of one identity are paired in order. None when the real tree shows no node."""

    def close(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
        return all(abs(x - y) <= tolerance for x, y in zip(a, b, strict=True))

    return share_placed_close(
        [(n.key(), n.bounds) for n in predicted.nodes], [(n.key(), n.bounds) for n in real.nodes], close
    )


def android_scores(prediction: str, reference: str) -> dict[str, float | None]:
    pred, real = parse_tree(prediction), parse_tree(reference)
    scores: dict[str, float | None] = {
        "node_f1": multiset_f1([n.key() for n in pred.nodes], [n.key() for n in real.nodes]),
        "node_flag_f1": multiset_f1([_flag_key(n) for n in pred.nodes], [_flag_key(n) for n in real.nodes]),
        "position_within_tolerance": position_share(pred, real),
        "package_match": None,
        "activity_match": None,
        "error_match": None,
    }
    if real.has_head:  # a runner's text (an action that never ran) has none of these parts
        form = pred.has_head  # a reply not in the Android form matches none
        scores["package_match"] = float(form and pred.package == real.package)
        scores["activity_match"] = float(form and pred.activity == real.activity)
        scores["error_match"] = float(form and bool(pred.error) == bool(real.error))
    return scores

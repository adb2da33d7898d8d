"""AndroidControl episodes (human demonstrations on Android apps) as android-domain trajectories.

Source: https://github.com/google-research/google-research/tree/master/android_control (the
README; data at gs://gresearch/android_control, Apache-2.0 as the Hub mirror
https://huggingface.co/datasets/leosltl/Android-Control states). An episode has `episode_id`,
`goal`, `screenshots`, `accessibility_trees` (one `AndroidAccessibilityForest` per observation),
`screenshot_widths`, `screenshot_heights`, `actions` (JSON dictionaries; there are
len(screenshots) - 1 of them, performed between consecutive observations) and `step_instructions`
(one per action). The release is GZIP TFRecords of protobufs, which we cannot read here (no
TensorFlow/protobuf reader installed), so this importer reads the JSON/JSONL/Parquet form that
community conversions use: the same field names, one episode a row, each forest given as JSON
(an object, or JSON text) with the proto's fields
(https://github.com/google-deepmind/android_env/tree/main/android_env/proto/a11y:
`windows` -> `tree` -> `nodes`, each node with `unique_id`, `bounds_in_screen` {left, top, right,
bottom}, `class_name`, `text`, `content_description`, `view_id_resource_name`, `package_name`,
`is_clickable`, `is_long_clickable`, `is_editable`, `is_scrollable`, `is_focused`, `is_checked`,
`is_selected`, `is_enabled`, `is_visible_to_user`, `child_ids`). Field names are accepted in the
proto's snake_case or in protobuf JSON's lowerCamelCase; protobuf JSON leaves out false and 0, so a
flag that is absent counts as false, except `is_enabled` and `is_visible_to_user`, which hide or
disable a node only when written as false (an absent one cannot tell "false" from "not recorded").

ADP (https://github.com/neulab/agent-data-protocol, `datasets/androidcontrol`) and android_world
publish the episodes with each screen already flattened: `accessibility_trees[i]` is a list of UI
elements as android_world's `representation_utils.UIElement` holds them (`text`,
`content_description`, `class_name`, `resource_id` or `resource_name`, `package_name` where kept,
`bbox_pixels` {x_min, x_max, y_min, y_max}, and the `is_*` flags, `is_visible` for visibility),
with no parent links, and `actions` as objects rather than JSON text. A screen given as a list is
read in this form (auto-detected per screen): the elements become one flat hierarchy in their
order, rendered by the same `parse_screen`/`render`, so every node is at depth 0. `hint_text` and
`tooltip` are not shown (our tree has no field for them), nor are `is_checkable`/`is_focusable`
(the proto path does not show them either). ADP's elements carry no package, so the package line
says `unknown` there.

Conversion:
- Each forest becomes our `android_ui_tree` text (sandboxes/android/tree.py): the windows, in the
  forest's order, are written as one UiAutomator-style hierarchy and compacted by the sandbox's own
  `parse_screen` and `render`, so nodes fold, cap and print exactly as a live screen's do. The
  package is the active application window's; the activity is not recorded (`unknown`).
- Actions in our JSON form (sandboxes/android/actions.py): click/long_press at x,y stay so (the node
  under the point, in the screen the action was taken on, goes to the step's `info.element`),
  scroll/open_app/input_text/navigate_home/navigate_back likewise; `wait` gets our default seconds;
  the README's `type` (click at x,y, type, Enter) becomes `input_text` into the node under the
  point (the Enter is noted in `info`, our set has no combined form).
- Screenshots are not carried (the text form is what the world model sees; the PNGs are not kept).
  An episode with one fewer tree than it should have loses its last action (outcome `truncated`).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any, ClassVar

from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from sandboxes.android.actions import parse_action
from sandboxes.android.tree import parse_screen, render
from sandboxes.android.tree_text import Node as TreeNode
from sandboxes.android.tree_text import parse_tree
from sandboxes.base import InvalidActionError
from schemas.records import Action, Environment, Observation, Outcome, Policy, Task

OBSERVATION_FORMAT = "android_ui_tree"  # sandboxes/android/observe.py
MAX_NODES = 300  # AndroidConfig.max_nodes
# Node flag -> the UiAutomator attribute our tree reads it from.
_FLAGS = {
    "is_clickable": "clickable",
    "is_long_clickable": "long-clickable",
    "is_editable": "editable",
    "is_scrollable": "scrollable",
    "is_focused": "focused",
    "is_checked": "checked",
    "is_selected": "selected",
}
_CAMEL = re.compile(r"_([a-z])")
# AndroidControl action_type -> ours, for those that map one to one.
_SAME = ("click", "long_press", "scroll", "open_app", "input_text", "navigate_home", "navigate_back", "wait")


def _get(data: dict[str, Any], name: str, default: Any = None) -> Any:
    """`name` in the proto's snake_case, or in protobuf JSON's lowerCamelCase."""
    if name in data:
        return data[name]
    return data.get(_CAMEL.sub(lambda m: m.group(1).upper(), name), default)


def _as_json(value: Any, what: str) -> Any:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise BadRow(f"{what} is text but not JSON: {exc}") from None
    return value


def _bounds(node: dict[str, Any]) -> str:
    rect = _get(node, "bounds_in_screen") or {}
    left, top, right, bottom = (int(_get(rect, side, 0) or 0) for side in ("left", "top", "right", "bottom"))
    return f"[{left},{top}][{right},{bottom}]"


def _element(node: dict[str, Any]) -> ET.Element:
    attributes = {
        "class": str(_get(node, "class_name", "") or ""),
        "text": str(_get(node, "text", "") or ""),
        "content-desc": str(_get(node, "content_description", "") or ""),
        "resource-id": str(_get(node, "view_id_resource_name", "") or ""),
        "package": str(_get(node, "package_name", "") or ""),
        "bounds": _bounds(node),
    }
    for flag, attribute in _FLAGS.items():
        if _get(node, flag) is True:
            attributes[attribute] = "true"
    if _get(node, "is_enabled") is False:
        attributes["enabled"] = "false"
    if _get(node, "is_visible_to_user") is False:
        attributes["displayed"] = "false"
    return ET.Element("node", attributes)


def _flat_bounds(element: dict[str, Any]) -> str:
    box = element.get("bbox_pixels") or {}
    if not isinstance(box, dict):
        box = {}
    left, top, right, bottom = (
        round(float(box.get(side) or 0)) for side in ("x_min", "y_min", "x_max", "y_max")
    )
    return f"[{left},{top}][{right},{bottom}]"


def _flat_element(element: dict[str, Any]) -> ET.Element:
    """An android_world UIElement (ADP's flat screens) as the UiAutomator node our tree reads."""
    attributes = {
        "class": str(element.get("class_name") or ""),
        "text": str(element.get("text") or ""),
        "content-desc": str(element.get("content_description") or ""),
        "resource-id": str(element.get("resource_id") or element.get("resource_name") or ""),
        "package": str(element.get("package_name") or ""),
        "bounds": _flat_bounds(element),
    }
    for flag, attribute in _FLAGS.items():
        if element.get(flag) is True:
            attributes[attribute] = "true"
    if element.get("is_enabled") is False:
        attributes["enabled"] = "false"
    if element.get("is_visible") is False:
        attributes["displayed"] = "false"
    return ET.Element("node", attributes)


def _flat_hierarchy(elements: list[Any], where: str) -> ET.Element:
    hierarchy = ET.Element("hierarchy")
    for number, element in enumerate(elements):
        if not isinstance(element, dict):
            raise BadRow(f"{where}[{number}] should be a UI element object, got {type(element).__name__}")
        try:
            hierarchy.append(_flat_element(element))
        except (TypeError, ValueError, OverflowError):
            raise BadRow(f"{where}[{number}].bbox_pixels should hold finite numbers") from None
    return hierarchy


def _window_elements(window: dict[str, Any], where: str) -> list[ET.Element]:
    """The window's root nodes as XML elements, children nested by `child_ids`."""
    tree = _get(window, "tree") or {}
    nodes = _get(tree, "nodes") or []
    if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
        raise BadRow(f"{where}.tree.nodes should be a list of objects")
    by_id = {int(_get(n, "unique_id", 0) or 0): n for n in nodes}
    children = {uid: [int(c) for c in _get(n, "child_ids") or []] for uid, n in by_id.items()}
    child_set = {c for ids in children.values() for c in ids}
    placed: set[int] = set()

    def build(uid: int) -> ET.Element:
        placed.add(uid)
        element = _element(by_id[uid])
        for child in children[uid]:
            if child in by_id and child not in placed:  # a cycle or a repeat would never end
                element.append(build(child))
        return element

    roots = [uid for uid in by_id if uid not in child_set]
    return [build(uid) for uid in roots if uid not in placed]


def _package(windows: list[dict[str, Any]]) -> str:
    """The package of the active application window, else of the first application window."""

    def package_of(window: dict[str, Any]) -> str:
        nodes = _get(_get(window, "tree") or {}, "nodes") or []
        return next((str(_get(n, "package_name")) for n in nodes if _get(n, "package_name")), "")

    apps = [w for w in windows if _get(w, "window_type") in ("TYPE_APPLICATION", 1)]
    for window in sorted(apps, key=lambda w: not _get(w, "is_active", False)):
        if package := package_of(window):
            return package
    return next((p for p in map(package_of, windows) if p), "")


def screen_text(forest: Any, where: str) -> tuple[str, dict[str, Any]]:
    """A screen (a forest, or android_world's flat list of UI elements) as our observation text and data."""
    forest = _as_json(forest, where)
    windows: list[dict[str, Any]] = []
    if isinstance(forest, list):  # ADP / android_world: the screen's UI elements, flattened
        hierarchy = _flat_hierarchy(forest, where)
    elif isinstance(forest, dict):
        windows = _get(forest, "windows") or []
        if not isinstance(windows, list) or not all(isinstance(w, dict) for w in windows):
            raise BadRow(f"{where}.windows should be a list of objects")
        hierarchy = ET.Element("hierarchy")
        for number, window in enumerate(windows):
            hierarchy.extend(_window_elements(window, f"{where}.windows[{number}]"))
    else:
        raise BadRow(
            f"{where} should be an AndroidAccessibilityForest object or a list of UI elements, "
            f"got {type(forest).__name__}"
        )
    screen = parse_screen(ET.tostring(hierarchy, encoding="unicode"), MAX_NODES)
    package = _package(windows) or screen.package or "unknown"
    text = render(screen, package, "unknown")
    data = {
        "package": package,
        "activity": "unknown",
        "nodes": len(screen.nodes),
        "truncated": screen.truncated,
    }
    return text, data


def _point(action: dict[str, Any], where: str) -> dict[str, Any]:
    if "x" not in action or "y" not in action:
        raise BadRow(f"{where} ({action.get('action_type')}) has no x and y")
    return {"x": action["x"], "y": action["y"]}


def _node_under(screen: str, x: int, y: int) -> TreeNode | None:
    """The node a touch at (x, y) reached: the deepest whose bounds hold the point, and the smallest
    of those. A flat screen (ADP's) puts every node at depth 0, so only the size tells the button
    from the page behind it."""

    def holds(node: TreeNode) -> bool:
        left, top, right, bottom = node.bounds
        return left <= x < right and top <= y < bottom

    def area(node: TreeNode) -> int:
        left, top, right, bottom = node.bounds
        return (right - left) * (bottom - top)

    hits = [node for node in parse_tree(screen).nodes if holds(node)]
    return max(hits, key=lambda node: (node.depth, -area(node))) if hits else None


def android_action(action: dict[str, Any], before: str, where: str) -> tuple[Action, dict[str, Any]]:
    """An AndroidControl action as ours, and what `info` should say about it. `before`: the text of
    the screen it was taken on, for the node under a point."""
    kind = action.get("action_type")
    info: dict[str, Any] = {}
    arguments: dict[str, Any] = {}
    point: dict[str, Any] = {}  # where the action touches the screen
    if kind in ("click", "long_press"):
        arguments = point = _point(action, where)
    elif kind == "type":
        point = _point(action, where)
        kind, arguments = "input_text", {"text": action.get("text")}
        info["source_action"] = "type: a click at x,y, the text, then Enter"
    elif kind == "scroll":
        arguments = {"direction": action.get("direction")}
    elif kind == "open_app":
        arguments = {"app_name": action.get("app_name")}
    elif kind == "input_text":
        arguments = {"text": action.get("text")}
    elif kind not in _SAME:
        raise BadRow(f"{where} has action_type {kind!r}; expected one of {', '.join((*_SAME, 'type'))}")
    if point:
        try:
            node = _node_under(before, int(point["x"]), int(point["y"]))
        except (TypeError, ValueError):
            node = None  # a malformed point: parse_action says so below
        if node is not None:
            info["element"] = {"index": node.index, "class": node.cls, "text": node.text, "desc": node.desc}
            if kind == "input_text":
                arguments["index"] = node.index
    try:
        return parse_action(kind, arguments), info
    except InvalidActionError as exc:
        raise BadRow(f"{where} is not a valid android action: {exc}") from None


class AndroidControlImporter(Importer):
    name: ClassVar[str] = "android_control"
    dataset: ClassVar[str] = "google-research/android_control"
    license: ClassVar[str] = "Apache-2.0"
    summary: ClassVar[str] = (
        "AndroidControl episodes (JSON; ADP/android_world flat element lists too) as our UI tree text"
    )
    id_field: ClassVar[str | None] = "episode_id"

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        data = row.data
        episode_id = str(require(data, "episode_id", (str, int)))
        goal = require(data, "goal", str)
        forests = require(data, "accessibility_trees", list)
        actions = [_as_json(a, f"actions[{i}]") for i, a in enumerate(require(data, "actions", list))]
        instructions = [str(s) for s in data.get("step_instructions") or []]
        if not actions:
            raise BadRow("the episode has no actions")
        if len(forests) not in (len(actions), len(actions) + 1):
            raise BadRow(
                f"{len(forests)} accessibility_trees for {len(actions)} actions; expected {len(actions) + 1} "
                "(one before each action and one after the last)"
            )
        outcome = Outcome(status="completed")
        if len(forests) == len(actions):  # the screen after the last action is missing
            outcome = Outcome(status="truncated")
        screens = [screen_text(f, f"accessibility_trees[{i}]") for i, f in enumerate(forests)]
        turns = []
        for k, raw in enumerate(actions[: len(screens) - 1]):
            if not isinstance(raw, dict):
                raise BadRow(f"actions[{k}] should be an object, got {type(raw).__name__}")
            action, info = android_action(raw, screens[k][0], f"actions[{k}]")
            if k < len(instructions):
                info["step_instruction"] = instructions[k]
            text, observed = screens[k + 1]
            turns.append(
                Turn(action, Observation(format=OBSERVATION_FORMAT, text=text, data=observed), info=info)
            )
        widths, heights = data.get("screenshot_widths") or [], data.get("screenshot_heights") or []
        config: dict[str, Any] = {}
        if widths and heights:
            config["screen_width"], config["screen_height"] = int(widths[0]), int(heights[0])
        metadata: dict[str, Any] = {"step_instructions": instructions}
        if outcome.status == "truncated":
            metadata["final_action"] = actions[-1]
        return Episode(
            domain="android",
            task=Task(id=episode_id, instruction=goal, metadata=metadata),
            initial=Observation(format=OBSERVATION_FORMAT, text=screens[0][0], data=screens[0][1]),
            turns=turns,
            environment=Environment(name="android", backend="imported", config=config),
            policy=Policy(name="imported", config={"agent": "human rater (AndroidControl)"}),
            outcome=outcome,
        )


IMPORTER = AndroidControlImporter()

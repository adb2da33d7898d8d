"""Mind2Web tasks (crowdsourced demonstrations on real web sites) as web-domain trajectories.

Source: https://huggingface.co/datasets/osunlp/Mind2Web (CC-BY-4.0). The card's fields, one task a
row: `annotation_id`, `website`, `domain`, `subdomain`, `confirmed_task`, `action_reprs` (list of
str), and `actions`, a list of steps each with `action_uid`, `raw_html` and `cleaned_html` (the page
before the action), `operation` {`op`: CLICK/TYPE/SELECT, `original_op` (also HOVER/ENTER, mapped
to CLICK by the authors), `value`}, `pos_candidates` (the target element: `tag`, `backend_node_id`,
`attributes` as JSON text, `is_original_target`, `is_top_level_target`; empty when the target did
not survive the authors' cleaning) and `neg_candidates`. The raw release is JSON files each holding
a list of tasks (`data/train/train_*.json`); the Hub's Parquet conversion has the same columns.
`operation`, candidates and `attributes` are read whether they are objects or JSON text.

Conversion:
- Each page is rendered from its HTML (`raw_html`, else `cleaned_html`) into our web tree
  (collectors/importers/html_tree.py): `[bid] role 'name'` lines with Chromium's `backend_node_id`
  as the bid, under a `Title:` header line. Mind2Web records no URL, tabs or focus, so those header
  lines are left out rather than made up.
- Actions target `pos_candidates[0].backend_node_id` (its nearest shown ancestor when the element
  itself has no line, e.g. an icon's <path>): CLICK -> `click(bid)`, TYPE -> `fill(bid, value)`,
  SELECT -> `select_option(bid, value)`; where `original_op` says HOVER or ENTER, `hover(bid)` and
  `press(bid, 'Enter')`, which our action set has. Text from sandboxes.web.actions.parse_action.
- The observation after action k is the page action k+1 was taken on. The page after the last
  action is not in the data, so the last action is left out (kept in `task.metadata.final_action`)
  and the outcome is `truncated`. An action with no target (empty `pos_candidates`) ends the
  trajectory there the same way (`task.metadata.truncated_at`); a task whose first action has none,
  or with a single action, or whose HTML cannot be parsed, is a BadRow.
- Not carried: screenshots (none in this release), `neg_candidates`, timings (none recorded).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from collectors.importers.html_tree import HtmlTreeError, Page, render_page
from sandboxes.base import InvalidActionError
from sandboxes.web.actions import parse_action
from schemas.records import Action, Environment, Observation, Outcome, Policy, Task

OBSERVATION_FORMAT = "a11y_tree"  # the web sandbox's (sandboxes/web/observe.py)
OPERATIONS = ("CLICK", "TYPE", "SELECT")


@dataclass
class _Step:
    """One Mind2Web action, read and checked."""

    uid: str
    html: str
    html_field: str
    op: str
    original_op: str
    value: str
    target: str  # backend_node_id of pos_candidates[0]; "" when there is none
    repr: str


def _json_value(value: Any, what: str) -> Any:
    """`value`, or the JSON it holds when it is text (the Hub's Parquet stores some fields so)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise BadRow(f"{what} is text but not JSON: {exc}") from None
    return value


def _target(candidates: Any, where: str) -> str:
    candidates = _json_value(candidates, f"pos_candidates{where}") if candidates is not None else []
    if not isinstance(candidates, list):
        raise BadRow(f"pos_candidates{where} should be a list, got {type(candidates).__name__}")
    if not candidates:
        return ""
    first = _json_value(candidates[0], f"pos_candidates[0]{where}")
    if not isinstance(first, dict):
        raise BadRow(f"pos_candidates[0]{where} should be an object, got {type(first).__name__}")
    bid = first.get("backend_node_id")
    if bid in (None, ""):  # older copies keep it only inside the attributes
        attributes = _json_value(first.get("attributes") or "{}", f"pos_candidates[0].attributes{where}")
        bid = attributes.get("backend_node_id") if isinstance(attributes, dict) else None
    if bid in (None, ""):
        raise BadRow(f"pos_candidates[0]{where} has no backend_node_id")
    return str(bid).strip()


def _read_step(raw: Any, index: int, reprs: list[str]) -> _Step:
    where = f" of actions[{index}]"
    if not isinstance(raw, dict):
        raise BadRow(f"actions[{index}] should be an object, got {type(raw).__name__}")
    present = [f for f in ("raw_html", "cleaned_html") if isinstance(raw.get(f), str) and raw[f].strip()]
    html_field = present[0] if present else ""
    if not html_field:
        raise BadRow(f"actions[{index}] has neither raw_html nor cleaned_html")
    operation = _json_value(require(raw, "operation", (dict, str), where), f"operation{where}")
    if not isinstance(operation, dict):
        raise BadRow(f"operation{where} should be an object, got {type(operation).__name__}")
    op = str(operation.get("op") or "").upper()
    if op not in OPERATIONS:
        expected = ", ".join(OPERATIONS)
        raise BadRow(f"operation.op{where} is {operation.get('op')!r}; expected one of {expected}")
    return _Step(
        uid=str(raw.get("action_uid") or ""),
        html=raw[html_field],
        html_field=html_field,
        op=op,
        original_op=str(operation.get("original_op") or op).upper(),
        value="" if operation.get("value") is None else str(operation["value"]),
        target=_target(raw.get("pos_candidates"), where),
        repr=reprs[index] if index < len(reprs) else "",
    )


def web_action(step: _Step, bid: str) -> Action:
    """The step as our BrowserGym-style action on `bid`."""
    if step.op == "TYPE":
        kind, arguments = "fill", {"bid": bid, "value": step.value}
    elif step.op == "SELECT":
        kind, arguments = "select_option", {"bid": bid, "options": step.value}
    elif step.original_op == "HOVER":
        kind, arguments = "hover", {"bid": bid}
    elif step.original_op == "ENTER":
        kind, arguments = "press", {"bid": bid, "key_comb": "Enter"}
    else:
        kind, arguments = "click", {"bid": bid}
    try:
        return parse_action(kind, arguments)
    except InvalidActionError as exc:
        raise BadRow(f"action {step.uid or '?'} does not make a web action: {exc}") from None


def observation(page: Page, step: _Step) -> Observation:
    text = f"Title: {page.title}\n\n{page.tree.text}"
    data = {
        "title": page.title,
        "elements": page.tree.elements,
        "tree_nodes": page.tree.node_count,
        "truncated": page.tree.truncated,
        "html_field": step.html_field,
        "action_uid": step.uid,  # the Mind2Web step this page was recorded before
    }
    return Observation(format=OBSERVATION_FORMAT, text=text, data=data)


def _render(step: _Step, index: int) -> Page:
    try:
        return render_page(step.html, clickable_bids=[step.target] if step.target else [])
    except HtmlTreeError as exc:
        raise BadRow(f"actions[{index}].{step.html_field}: {exc}") from None


class Mind2WebImporter(Importer):
    name: ClassVar[str] = "mind2web"
    dataset: ClassVar[str] = "osunlp/Mind2Web"
    license: ClassVar[str] = "CC-BY-4.0"
    summary: ClassVar[str] = "Mind2Web tasks: pages' HTML as our web tree, CLICK/TYPE/SELECT as bid actions"
    id_field: ClassVar[str | None] = "annotation_id"

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        data = row.data
        task_id = str(require(data, "annotation_id", (str, int)))
        instruction = require(data, "confirmed_task", str)
        raw_actions = require(data, "actions", list)
        reprs = [str(r) for r in data.get("action_reprs") or []]
        if len(raw_actions) < 2:
            raise BadRow(
                f"the task has {len(raw_actions)} action(s); at least 2 are needed, since the page after "
                "the last action is not recorded"
            )
        steps = [_read_step(raw, i, reprs) for i, raw in enumerate(raw_actions)]
        metadata: dict[str, Any] = {
            key: data[key] for key in ("website", "domain", "subdomain") if data.get(key) not in (None, "")
        }
        metadata["action_reprs"] = reprs
        # The last usable action: the first with no target ends the trajectory before it.
        usable = next((i for i, s in enumerate(steps) if not s.target), len(steps))
        if usable == 0:
            raise BadRow("actions[0] has no pos_candidates: its target element is not in the page")
        pages = [_render(steps[0], 0)]
        turns: list[Turn] = []
        for k in range(min(usable, len(steps) - 1)):
            bid = pages[k].shown_bid(steps[k].target)
            if bid is None:
                usable = k
                metadata["truncated_at"] = {
                    "action": k,
                    "reason": f"the target element {steps[k].target} is hidden in its page",
                }
                break
            pages.append(_render(steps[k + 1], k + 1))
            step = steps[k]
            info = {"action_uid": step.uid, "action_repr": step.repr, "operation": step.original_op}
            if bid != steps[k].target:
                info["source_bid"] = steps[k].target  # the element Mind2Web names; `bid` shows it
            turns.append(Turn(web_action(steps[k], bid), observation(pages[k + 1], steps[k + 1]), info=info))
        if not turns:
            raise BadRow(f"actions[0]'s target element {steps[0].target} is hidden in its page")
        if usable < len(steps) - 1 and "truncated_at" not in metadata:
            metadata["truncated_at"] = {"action": usable, "reason": "pos_candidates is empty"}
        dropped = steps[len(turns)]
        metadata["final_action"] = {"action_uid": dropped.uid, "action_repr": dropped.repr, "op": dropped.op}
        environment_config = {k: metadata[k] for k in ("website", "domain", "subdomain") if k in metadata}
        return Episode(
            domain="web",
            task=Task(id=task_id, instruction=instruction, metadata=metadata),
            initial=observation(pages[0], steps[0]),
            turns=turns,
            environment=Environment(name="web", backend="imported", config=environment_config),
            policy=Policy(name="imported", config={"agent": "human annotator (Mind2Web crowdworkers)"}),
            # The page after the last kept action's successor is not recorded: the episode is cut.
            outcome=Outcome(status="truncated"),
        )


IMPORTER = Mind2WebImporter()

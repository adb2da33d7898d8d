"""Web task verifiers through the real runner: real Chromium, the real embedded sites, the shop's
state read back from its server. The oracle (each task's scripted actions) scores 1; a wrong end
state scores 0 or its documented partial value; two browsers sharing one sites server keep their
sessions apart."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.tasks import TaskSpec, embedded_tasks
from sandboxes.http_server import LocalHTTPServer
from sandboxes.web import WebConfig, WebSandbox, parse_action, start_sites_server
from sandboxes.web.verify import items_score, score_site_state
from schemas.records import Trajectory
from tests.sandboxes.scripted_runs import run_scripted
from tests.sandboxes.web.conftest import require_chromium

pytestmark = pytest.mark.chromium
EMBEDDED = {spec.id: spec for spec in embedded_tasks("web")}


def variant(task_id: str, new_id: str, edit: object = None, actions: list[dict] | None = None) -> TaskSpec:
    """An embedded task under another id, its scripted actions edited (`edit(actions)`) or replaced."""
    spec = copy.deepcopy(EMBEDDED[task_id])
    spec.task.id = new_id
    if actions is not None:
        spec.actions = actions
    if callable(edit):
        edit(spec.actions)
    return spec


def _set(index: int, key: str, value: object):  # noqa: ANN202 (an edit for `variant`)
    return lambda actions: actions[index]["arguments"].__setitem__(key, value)


@pytest.fixture(scope="module")
def sites() -> Iterator[LocalHTTPServer]:
    require_chromium()
    with start_sites_server() as server:
        yield server


def run(
    out: Path, server: LocalHTTPServer, specs: list[TaskSpec], sandboxes: int = 1
) -> dict[str, Trajectory]:
    config = WebConfig(sites_port=server.port)
    summary, found = run_scripted(
        "web", lambda: WebSandbox(config), parse_action, specs, out, max_steps=20, sandboxes=sandboxes
    )
    assert summary.outcomes == {"completed": len(specs)}, summary.outcomes
    return found


def test_the_oracle_scores_1_and_wrong_end_states_score_their_share(
    sites: LocalHTTPServer, tmp_path: Path
) -> None:
    specs = [
        EMBEDDED["shop-cart-duffels"],
        EMBEDDED["shop-order-express"],
        EMBEDDED["docs-tutorial-interpreter"],
        variant(
            "shop-cart-duffels", "three-duffels", _set(1, "options", "3")
        ),  # right product, wrong quantity
        variant("shop-order-express", "standard-shipping", _set(9, "bid", "29")),  # 1 of 7 order fields wrong
        variant("docs-tutorial-interpreter", "stayed-on-contents", actions=[]),
        variant("shop-signin-alice", "docs-has-no-state", actions=[]),
    ]
    specs[-1].task.verifier = {"kind": "site_state", "site": "docs", "signed_in": "alice@example.com"}
    found = run(tmp_path / "data", sites, specs)
    rewards = {task_id: t.outcome.reward for task_id, t in found.items()}
    assert rewards.pop("standard-shipping") == pytest.approx(6 / 7)
    assert rewards == {
        "shop-cart-duffels": 1.0,
        "shop-order-express": 1.0,
        "docs-tutorial-interpreter": 1.0,
        "three-duffels": 0.5,
        "stayed-on-contents": 0.0,
        "docs-has-no-state": None,
    }
    order = found["shop-order-express"].outcome.verification
    assert order is not None and order.verifier == "site_state" and not order.error
    assert order.details["order"]["score"] == 1.0 and '"placed_in_session": true' in order.output
    assert 0 < order.elapsed_s < 2.0
    wrong = found["standard-shipping"].outcome.verification
    assert wrong is not None and "wrong fields ['shipping']" in wrong.output
    page = found["stayed-on-contents"].outcome.verification
    assert page is not None and page.verifier == "page_url" and "tutorial/index.html" in page.output
    broken = found["docs-has-no-state"].outcome.verification
    assert broken is not None and broken.reward is None and "only the shop keeps state" in broken.error


def test_two_browsers_on_one_sites_server_see_only_their_own_session(
    sites: LocalHTTPServer, tmp_path: Path
) -> None:
    specs = [
        EMBEDDED["shop-contact-returns"],
        variant("shop-contact-returns", "message-not-sent", lambda actions: actions.pop()),
        EMBEDDED["shop-newsletter"],
        variant("shop-newsletter", "newsletter-cancelled", _set(2, "bid", "61")),
    ]
    found = run(tmp_path / "data", sites, specs, sandboxes=2)
    rewards = {task_id: t.outcome.reward for task_id, t in found.items()}
    assert rewards == {
        "shop-contact-returns": 1.0,
        "message-not-sent": 0.0,
        "shop-newsletter": 1.0,
        "newsletter-cancelled": 0.0,
    }
    unsent = found["message-not-sent"].outcome.verification
    assert unsent is not None and "no message was sent" in unsent.output


def test_the_exploratory_tasks_say_why_they_have_no_verifier() -> None:
    checkable = [s for s in EMBEDDED.values() if s.task.verifier["kind"] != "none"]
    assert len(checkable) >= 8 and all(spec.actions for spec in checkable)
    for spec in EMBEDDED.values():
        if spec.task.verifier["kind"] == "none":
            assert spec.task.verifier["reason"] and not spec.actions


def test_partial_credit_of_items_and_orders() -> None:
    assert items_score({"9": 2}, {"9": 2}) == 1.0
    assert items_score({"9": 2}, {"9": 1}) == 0.5
    assert items_score({"9": 2}, {"9": 2, "4": 1}) == 0.5
    assert items_score({"9": 2}, {}) == 0.0
    state = {
        "cart": [],
        "orders": [{"number": 10231, "placed_in_session": False, "items": [{"product": 9, "quantity": 1}]}],
        "messages": [],
        "signed_in": "",
        "subscribed": "",
    }
    seeded_only = score_site_state({"kind": "site_state", "order": {"items": {"9": 1}}}, state)
    assert seeded_only.reward == 0.0 and "no order was placed" in seeded_only.output

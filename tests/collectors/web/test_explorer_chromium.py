"""The web explorer driving a real WebSandbox (Chromium) on the embedded sites."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import pytest

from collectors.tasks import embedded_tasks
from collectors.web.explorer import WebExplorer
from sandboxes.web import WebSandbox, parse_action
from sandboxes.web.config import origin_of
from schemas.records import Observation
from tests.collectors.conftest import play

pytestmark = pytest.mark.chromium


@pytest.fixture(scope="module")
def sandbox() -> Iterator[WebSandbox]:
    with WebSandbox() as web:
        yield web


def explore(sandbox: WebSandbox, task_id: str, seed: int, steps: int) -> list[tuple[str, Observation]]:
    spec = next(t for t in embedded_tasks("web") if t.id == task_id)
    policy = WebExplorer(parse_action, end_probability=0.0)
    played = play(sandbox, policy, spec.task, random.Random(seed), steps)
    assert len(played) == steps  # end_probability 0: the walk never stops by itself
    return [(action.kind, observation) for action, observation in played]


def test_a_walk_on_the_shop_fills_clicks_and_stays_on_the_allowed_origins(sandbox: WebSandbox) -> None:
    walk = explore(sandbox, "shop-checkout", seed=3, steps=30)
    allowed = {"http://shop.agentworld.test", "http://docs.agentworld.test"}
    urls = {o.data["url"] for _, o in walk}
    assert all(url == "about:blank" or origin_of(url) in allowed for url in urls), urls
    assert len(urls) >= 3, urls
    worked = Counter(kind for kind, o in walk if not o.data["last_action_error"])
    assert worked["fill"] >= 1 and worked["click"] >= 1, worked
    failed = [o.data["last_action_error"] for _, o in walk if o.data["last_action_error"]]
    assert len(failed) <= len(walk) // 3, failed


def test_a_walk_on_the_docs_follows_links(sandbox: WebSandbox) -> None:
    walk = explore(sandbox, "docs-library", seed=4, steps=6)
    paths = {o.data["url"] for _, o in walk if origin_of(o.data["url"]) == "http://docs.agentworld.test"}
    assert len(paths) >= 2, paths

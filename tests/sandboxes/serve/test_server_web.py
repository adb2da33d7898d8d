"""The web domain through the server: openenv-core's GenericEnvClient drives a real Chromium (Playwright,
made and closed in the session's own thread) through an embedded task to its page_url verifier."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from openenv.core.generic_client import GenericEnvClient

from sandboxes.serve.server import build_app, real_sandbox_factory
from sandboxes.tasks import embedded_tasks
from tests.sandboxes.serve.conftest import Recorder, serving

TASK = "docs-tutorial-interpreter"  # click bid 50 on the tutorial index; verifier: page_url


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    if not os.path.exists("/usr/bin/chromium"):
        pytest.fail("Chromium is missing: apt-get install chromium (never `playwright install`)")
    made = Recorder(real_sandbox_factory("web"))
    yield made
    assert not made.leaked(), f"browser processes survived: {made.leaked()}"


def test_openenv_client_plays_a_web_task_to_its_verifier_reward(recorder: Recorder) -> None:
    specs = {spec.id: spec for spec in embedded_tasks("web")}
    app = build_app(recorder, [s.task for s in specs.values()], domain="web", max_sessions=1)
    with serving(app) as url, GenericEnvClient(base_url=url).sync() as env:
        first = env.reset(task_id=TASK)
        assert first.observation["format"] == "a11y_tree"
        assert first.observation["data"]["url"] == "http://docs.agentworld.test/tutorial/index.html"
        assert any(r.startswith("pid:") for r in recorder.held()), "a browser runs for the session"
        (scripted,) = specs[TASK].actions
        result = env.step({"kind": scripted["kind"], "arguments": scripted["arguments"]})
        assert result.observation["data"]["url"].endswith("/tutorial/interpreter.html")
        last = env.step({"kind": "done"})
        assert last.done and last.reward == 1.0
        env.reset(task_id=TASK)  # the same browser, a new episode: staying put earns nothing
        assert env.step({"kind": "done"}).reward == 0.0
    assert app.state.stats.rewards == [1.0, 0.0] and app.state.stats.counts["closed"] == 1

"""The simulator and the LLM policy on the web and search domains, over real local HTTP chat servers
whose models are deterministic functions (see tests/training/test_backends.py::scripted_chat_server)."""

from __future__ import annotations

import json
import re

import pytest

from collectors.policies.llm import LLMPolicy
from collectors.tasks import TaskSpec
from sandboxes.base import InvalidActionError
from sandboxes.checks import check_sandbox
from sandboxes.search import extract_action, search_action
from sandboxes.web import parse_action as parse_web_action
from schemas import read_trajectories
from schemas.records import Action, Task
from tests.training.test_backends import scripted_chat_server
from tests.training.test_simulator import simulated_fleet
from training.backends.openai_http import OpenAIBackend
from training.simulator import SimulatedSandbox

START = """URL: http://shop.agentworld.test/
Title: Shop
Tabs: [0] Shop (active)
Focused: none

RootWebArea 'Shop', focused
\t[12] link 'Cart (0)', url='/cart'
\t[13] button 'Sign in'"""
WEB_TASK = Task(id="shop", instruction="Open the cart.", metadata={"initial_observation": START})


def shop_world(messages: list[dict]) -> str:
    """A web world model of a two-page shop: clicking bid 12 opens the cart, anything else stays."""
    action = messages[-1]["content"].split("**Action:**\n", 1)[1]
    page = START
    if action == "click('12')":
        page = (
            "URL: http://shop.agentworld.test/cart\nTitle: Cart\nTabs: [0] Cart (active)\nFocused: none\n\n"
            "RootWebArea 'Cart', focused\n\t[20] heading 'Your cart is empty'\n\t[21] link 'Shop', url='/'"
        )
    thought = f"<think>\nThe agent did {action}.\n</think>\n"
    return f"{thought}<predicted_observation>\n{page}\n</predicted_observation>"


def search_world(messages: list[dict]) -> str:
    action = messages[-1]["content"].split("**Action:**\n", 1)[1]
    if action.startswith("web_search("):
        text = (
            'Results 1-2 of about 2 for "gather"\n\n[1] http://docs.python.agentworld.test/a.html\n'
            "Title: A\nSnippet: first\n\n[2] http://docs.python.agentworld.test/b.html\nTitle: B"
        )
    else:
        text = "Title: A\nURL: http://docs.python.agentworld.test/a.html\n\n# A\n\nSome text."
    return f"<predicted_observation>\n{text}\n</predicted_observation>"


def test_simulated_web_sandbox_validates_actions_and_reads_the_page() -> None:
    with scripted_chat_server(shop_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url), domain="web")
        check_sandbox(sim, WEB_TASK, [parse_web_action("click", {"bid": "12"})])
        first = sim.reset(WEB_TASK)
        assert first.format == "a11y_tree" and first.text == START
        result = sim.step(parse_web_action("click", {"bid": "12"}))
        obs = result.observation
        assert obs.format == "a11y_tree" and result.info["format_failure"] is False
        assert (obs.data["url"], obs.data["title"]) == ("http://shop.agentworld.test/cart", "Cart")
        assert [e["bid"] for e in obs.data["elements"]] == ["20", "21"]
        assert obs.data["tabs"] == [{"index": 0, "title": "Cart", "active": True}]
        # The action text the model saw is the web sandbox's canonical call.
        assert server.requests[-1]["messages"][-1]["content"].endswith("**Action:**\nclick('12')")
        with pytest.raises(InvalidActionError):
            sim.step(Action("click", {}, ""))  # no bid
        with pytest.raises(InvalidActionError):
            sim.step(Action("teleport", {}, ""))
        assert sim.describe().name == "web"
        sim.close()


def test_simulated_search_sandbox_formats_results_and_pages() -> None:
    with scripted_chat_server(search_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url), domain="search")
        first = sim.reset(Task(id="s"))
        assert first.format == "search_results" and "No search has been made yet" in first.text
        found = sim.step(search_action("gather")).observation
        assert found.format == "search_results"
        assert [r["url"] for r in found.data["results"]] == [
            "http://docs.python.agentworld.test/a.html",
            "http://docs.python.agentworld.test/b.html",
        ]
        assert found.data["results"][0]["snippet"] == "first"
        page = sim.step(extract_action("http://docs.python.agentworld.test/a.html")).observation
        assert page.format == "markdown" and page.data["title"] == "A"
        with pytest.raises(InvalidActionError):
            sim.step(Action("web_extractor", {"url": "file:///etc/passwd"}, ""))


def agent(messages: list[dict]) -> str:
    """An agent that clicks the cart link while it sees one, then says it is done."""
    screen = messages[-1]["content"]
    if "link 'Cart" in screen:
        bid = re.search(r"\[(\d+)\] link 'Cart", screen).group(1)  # type: ignore[union-attr]
        return json.dumps({"thought": "open the cart", "action": "click", "bid": bid})
    return 'Done. {"done": true}'


def test_llm_policy_drives_a_simulated_web_episode_in_the_fleet(tmp_path) -> None:
    specs = [TaskSpec(task=WEB_TASK)]
    with scripted_chat_server(shop_world) as world, scripted_chat_server(agent) as policy_server:
        backend = OpenAIBackend(world.base_url)
        # No domain given: the policy takes it from the first observation's format.
        summary = simulated_fleet(
            backend,
            lambda: LLMPolicy(policy_server.base_url, "agent", max_retries=0),
            specs,
            tmp_path,
            "web",
            episodes=1,
            max_steps=4,
        )
        system = policy_server.requests[0]["messages"][0]["content"]
    assert summary is not None
    [trajectory] = read_trajectories(str(tmp_path))
    assert trajectory.outcome.status == "completed", trajectory.outcome
    [step] = trajectory.steps
    assert (step.action.kind, step.action.arguments["bid"], step.action.text) == (
        "click",
        "12",
        "click('12')",
    )
    assert step.observation.data["url"] == "http://shop.agentworld.test/cart"
    # The policy's prompt carried the web action space and the task.
    assert "a web browser" in system and '{"action": "fill"' in system and "Open the cart." in system

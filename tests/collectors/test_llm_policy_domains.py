"""The LLM policy's replies on the web and search domains: `{"action": "<kind>", ...}` or `{"done": true}`,
validated by the domain's own parser (pure and fast)."""

from __future__ import annotations

import random

import pytest

from collectors.policies.base import INVALID
from collectors.policies.llm import LLMPolicy, domain_of, keyed_kinds, parse_reply
from sandboxes.domains import domain_spec
from schemas.records import Observation, Task

WEB = domain_spec("web")
SEARCH = domain_spec("search")


def test_web_replies_become_browsergym_actions() -> None:
    action = parse_reply(
        '```json\n{"thought": "fill it", "action": "fill", "bid": "7", "value": "a@b.c"}\n```', WEB
    )
    assert action is not None and (action.kind, action.text) == ("fill", "fill('7', 'a@b.c')")
    assert action.arguments["bid"] == "7" and action.arguments["value"] == "a@b.c"
    go = parse_reply('{"action": "goto", "url": "http://shop.agentworld.test/cart"}', WEB)
    assert go is not None and go.text == "goto('http://shop.agentworld.test/cart')"
    assert parse_reply('All set. {"done": true}', WEB) is None


def test_search_replies_become_search_actions() -> None:
    action = parse_reply('{"action": "web_search", "query": "asyncio gather", "page": 2}', SEARCH)
    assert action is not None and action.text == "web_search(query='asyncio gather', page=2)"
    page = parse_reply(
        '{"action": "web_extractor", "url": "http://docs.python.agentworld.test/a.html"}', SEARCH
    )
    assert page is not None and page.kind == "web_extractor"


def test_android_replies_in_androidworlds_form_become_actions() -> None:
    android = domain_spec("android")
    action = parse_reply('{"action_type": "click", "index": 3}', android)
    assert action is not None and (action.kind, action.arguments) == ("click", {"index": 3})
    both = parse_reply('{"action": "click", "action_type": "click", "index": 3}', android)
    assert both is not None and both.kind == INVALID and "got both" in both.arguments["error"]


@pytest.mark.parametrize(
    ("spec", "reply", "reason"),
    [
        (WEB, '{"action": "teleport", "bid": "1"}', "teleport"),
        (WEB, '{"action": "click"}', "bid"),
        (WEB, '{"action": 3}', "'action' must be the name"),
        (WEB, '{"action": "click", "bid": "1", "done": true}', "got both"),
        (WEB, '{"click": "12"}', "exactly one of ['action', 'done']"),
        (WEB, '{"done": "yes"}', "'done' must be true"),
        (SEARCH, '{"action": "web_search", "query": "x", "num_results": 500}', "num_results"),
        (SEARCH, '{"action": "web_extractor", "url": "file:///etc/passwd"}', "http"),
        (SEARCH, "no idea", "no JSON object"),
    ],
)
def test_bad_replies_are_invalid_with_the_domains_reason(spec, reply: str, reason: str) -> None:
    action = parse_reply(reply, spec)
    assert action is not None and action.kind == INVALID
    assert action.arguments["raw"] == reply and reason in action.arguments["error"]


def test_kind_keyed_replies_only_where_the_action_space_shows_them() -> None:
    assert keyed_kinds(domain_spec("terminal").action_space) == ["command", "keystrokes", "done"]
    assert keyed_kinds(WEB.action_space) == keyed_kinds(SEARCH.action_space) == ["done"]
    # The terminal also takes the generic form; commentary beside the action is no argument.
    action = parse_reply('{"action": "command", "command": "ls"}')
    assert action is not None and (action.kind, action.text) == ("command", "ls")
    action = parse_reply('{"command": "ls", "explanation": "look around", "timeout": 5}')
    assert action is not None and action.arguments == {"command": "ls", "timeout": 5.0}


def test_the_domain_comes_from_the_first_observation() -> None:
    assert domain_of(Observation(format="a11y_tree", text="")) == "web"
    assert domain_of(Observation(format="search_results", text="")) == "search"
    assert domain_of(Observation(format="terminal_screen", text="$")) == "terminal"
    assert domain_of(Observation(format="something-new", text="")) == "terminal"
    policy = LLMPolicy("http://127.0.0.1:9/v1", "m", max_retries=0)
    policy.reset(
        Task(id="t", instruction="Find the docs."),
        Observation(format="search_results", text=""),
        random.Random(0),
    )
    system = policy.messages("x")[0]["content"]
    assert "a web search engine" in system and '"action": "web_extractor"' in system
    assert system.count('{"done": true}') == 1, "the way to stop is added once, where the space lacks it"
    terminal = LLMPolicy("http://127.0.0.1:9/v1", "m", max_retries=0)
    terminal.reset(
        Task(id="t", instruction="List files."), Observation("terminal_screen", "$"), random.Random(0)
    )
    prompt = terminal.messages("x")[0]["content"]
    assert prompt.startswith("You are an agent operating a Linux terminal (a bash shell in tmux) to complete")
    assert prompt.endswith(domain_spec("terminal").action_space) and prompt.count('{"done": true}') == 1
    fixed = LLMPolicy("http://127.0.0.1:9/v1", "m", domain="web")
    fixed.reset(Task(id="t"), Observation(format="terminal_screen", text="$"), random.Random(0))
    assert '"action": "click"' in fixed.messages("x")[0]["content"]

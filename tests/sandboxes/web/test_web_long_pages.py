"""Long pages are read viewport first; loads that outlast the wait bound are shown as they stand;
a start URL that cannot be loaded fails the reset."""

from __future__ import annotations

import re

import pytest

from sandboxes.web import WebConfig, WebSandbox
from sandboxes.web.sandbox import StartPageFailed
from tests.sandboxes.web.conftest import act, bid_of, task
from tests.sandboxes.web.live_server import LATE_S, live_server

pytestmark = pytest.mark.chromium

ROWS = 2000
TABLE = (
    "<!DOCTYPE html><title>Rows</title><table>"
    + "".join(
        f"<tr><td>Row {n}</td><td><button onclick=\"document.title='picked {n}'\">Pick {n}</button></td></tr>"
        for n in range(1, ROWS + 1)
    )
    + "</table>"
)
START = "<!DOCTYPE html><title>Start</title><h1>Start page</h1>" + (
    '<a href="/late">Late</a> <a href="/stalled">Half</a>'
)


def shown_rows(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"button 'Pick (\d+)'", text)]


def test_an_agent_scrolls_to_the_last_row_and_clicks_it_by_its_bid(sandbox: WebSandbox) -> None:
    with live_server({"/rows": TABLE}) as server:
        obs = sandbox.reset(task(server.url("/rows"), allowed=[server.origin]))
        first = shown_rows(obs.text)
        assert obs.data["viewport_first"] is True and first[0] == 1 and first[-1] < 100
        assert "px of the page below are not shown: scroll down to see them]" in obs.text
        while ROWS not in shown_rows(obs.text):  # as an agent would: scroll until the row shows
            before = shown_rows(obs.text)
            obs = sandbox.step(act("scroll", delta_x=0, delta_y=20_000)).observation
            assert shown_rows(obs.text) != before, "scrolling did not change what is shown"
        assert "scroll up to see them]" in obs.text
        obs = sandbox.step(act("click", bid=bid_of(obs, f"Pick {ROWS}"))).observation
    assert obs.data["last_action_error"] == "" and obs.data["title"] == f"picked {ROWS}"


def test_a_load_past_the_bound_is_shown_as_it_stands(sandbox: WebSandbox) -> None:
    with live_server({"/": START}) as server:
        allowed = [server.origin]
        obs = sandbox.reset(task(server.url("/"), allowed=allowed))
        # The document arrives in part and never ends: shown as far as it came, still loading.
        result = sandbox.step(act("click", bid=bid_of(obs, "Half")))
        obs = result.observation
        assert obs.data["url"] == server.url("/stalled") and "heading 'The first half arrived'" in obs.text
        assert result.info["settle"] == {
            "waited_ms": result.info["settle"]["waited_ms"],
            "timed_out": True,
            "still_loading": True,
        }
        assert "Loading: still loading" in obs.text
        # A start page that answers after the settle bound is waited for, never about:blank.
        obs = sandbox.reset(task(server.url("/late"), allowed=allowed))
        assert obs.data["url"] == server.url("/late") and "heading 'Late but here'" in obs.text
        assert obs.data["settle"]["waited_ms"] >= LATE_S * 1000 * 0.9


def test_a_navigation_without_an_answer_leaves_the_page_it_left(sandbox: WebSandbox) -> None:
    with live_server({"/": START}) as server:
        obs = sandbox.reset(task(server.url("/"), allowed=[server.origin]))
        sandbox.config.settle_timeout_ms = 800
        try:
            obs = sandbox.step(act("click", bid=bid_of(obs, "Late"))).observation
        finally:
            sandbox.config.settle_timeout_ms = WebConfig().settle_timeout_ms
    assert obs.data["url"] == server.url("/") and "heading 'Start page'" in obs.text
    assert obs.data["last_action_error"].endswith("it was stopped; the page shown is the one it left")


def test_an_unreachable_start_url_fails_the_reset(sandbox: WebSandbox) -> None:
    with live_server() as server:
        gone = server.url("/")
        origin = server.origin
    # The server is closed: nothing listens on its port any more.
    with pytest.raises(StartPageFailed, match=re.escape(f"start URL {gone} could not be loaded: ")):
        sandbox.reset(task(gone, allowed=[origin]))
    assert sandbox.alive  # the browser is fine; only the episode failed

"""The web sandbox on real Chromium and the real embedded sites: contract, every action kind,
errors the agent sees, settling (pages that navigate by themselves, slow pages, busy DOMs)."""

from __future__ import annotations

import pytest

from sandboxes.base import InvalidActionError
from sandboxes.checks import check_sandbox
from sandboxes.web import WebConfig, WebSandbox, site_url
from schemas.records import Action
from tests.sandboxes.web.conftest import act, bid_of, lab, require_chromium, task

pytestmark = pytest.mark.chromium


def test_check_sandbox_passes() -> None:
    require_chromium()
    sandbox = WebSandbox(WebConfig(screenshots=True))
    actions = [act("click", bid="5"), act("noop"), act("go_back"), act("click", bid="999")]
    check_sandbox(sandbox, task(site_url("shop", "/")), actions)


def test_observation_header_tree_data_and_attachments(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(site_url("shop", "/")))
    assert obs.format == "a11y_tree"
    header, _, tree = obs.text.partition("\n\n")
    assert header.splitlines() == [
        "URL: http://shop.agentworld.test/",
        "Title: Home - Agentworld Shop",
        "Tabs: [0] Home - Agentworld Shop (active)",
        "Focused: none",
    ]
    assert tree.startswith("RootWebArea 'Home - Agentworld Shop', focused\n")
    assert f"[{bid_of(obs, 'Cart (0)')}] link 'Cart (0)', url='/cart'" in tree
    assert obs.data["url"] == "http://shop.agentworld.test/"
    only_tab = {"index": 0, "url": obs.data["url"], "title": obs.data["title"], "active": True}
    assert obs.data["tabs"] == [only_tab]
    assert obs.data["settle"]["timed_out"] is False and obs.data["last_action_error"] == ""
    (html,) = [a for a in obs.attachments if a.name == "page.html"]
    assert html.media_type == "text/html" and b"Welcome to the Agentworld Shop" in html.content
    assert not any(a.name == "screenshot.png" for a in obs.attachments)  # off by default


def test_bids_are_stable_within_a_page(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(lab("/widgets")))
    before = {e["name"]: e["bid"] for e in obs.data["elements"]}
    after = sandbox.step(act("fill", bid=before["Name"], value="Ada")).observation
    assert {e["name"]: e["bid"] for e in after.data["elements"]} == before


def test_element_actions(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(lab("/widgets")))
    name = bid_of(obs, "Name", "textbox")
    obs = sandbox.step(act("fill", bid=name, value="Ada Lovelace")).observation
    assert f"[{name}] textbox 'Name', focused, value='Ada Lovelace'" in obs.text
    obs = sandbox.step(act("clear", bid=name)).observation
    assert f"[{name}] textbox 'Name', focused\n" in obs.text
    obs = sandbox.step(act("focus", bid=bid_of(obs, "Keys", "textbox"))).observation
    assert f"[{name}] textbox 'Name'\n" in obs.text
    obs = sandbox.step(act("focus", bid=name)).observation
    assert obs.data["focused_bid"] == name and f"Focused: [{name}]" in obs.text
    obs = sandbox.step(act("keyboard_type", text="Grace")).observation
    assert "value='Grace'" in obs.text
    obs = sandbox.step(act("keyboard_press", key="Backspace")).observation
    assert "value='Grac'" in obs.text
    colour = bid_of(obs, "Colour", "combobox")
    assert next(e for e in obs.data["elements"] if e["bid"] == colour)["options"] == ["Red", "Green", "Blue"]
    obs = sandbox.step(act("select_option", bid=colour, options="Blue")).observation
    assert "option 'Blue', selected" in obs.text
    obs = sandbox.step(act("hover", bid=bid_of(obs, "Hover me", "button"))).observation
    assert "button 'Hovered'" in obs.text
    obs = sandbox.step(act("dblclick", bid=bid_of(obs, "Double-click me"))).observation
    assert "button 'Double-clicked'" in obs.text
    obs = sandbox.step(act("click", bid=bid_of(obs, "Right-click me"), button="right")).observation
    assert "button 'Right-clicked'" in obs.text
    keys = bid_of(obs, "Keys", "textbox")
    sandbox.step(act("fill", bid=keys, value="abc"))
    obs = sandbox.step(act("press", bid=keys, key_comb="Enter")).observation
    assert "StaticText 'Entered abc'" in obs.text


def test_mouse_and_scroll_actions(sandbox: WebSandbox) -> None:
    sandbox.reset(task(lab("/widgets")))
    page = sandbox._page()
    box = page.locator("#pad").bounding_box()
    assert box is not None
    x, y = box["x"] + 10, box["y"] + 20
    obs = sandbox.step(act("mouse_click", x=x, y=y)).observation
    assert "Pad clicked at 10,20" in obs.text
    obs = sandbox.step(act("mouse_move", x=x + 5, y=y)).observation
    assert obs.data["last_action_error"] == ""
    obs = sandbox.step(act("mouse_dblclick", x=x + 1, y=y)).observation
    assert "Pad clicked at 11,20" in obs.text
    assert page.evaluate("window.scrollY") == 0
    sandbox.step(act("scroll", delta_x=0, delta_y=800))
    assert page.evaluate("window.scrollY") > 0


def test_navigation_actions_and_messages(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(site_url("shop", "/")))
    obs = sandbox.step(act("click", bid=bid_of(obs, "Products"))).observation
    assert obs.data["url"] == site_url("shop", "/products") and "Showing 1-5 of 36 results" in obs.text
    obs = sandbox.step(act("goto", url=site_url("shop", "/contact"))).observation
    assert obs.data["title"] == "Contact us - Agentworld Shop"
    obs = sandbox.step(act("go_back")).observation
    assert obs.data["url"] == site_url("shop", "/products")
    obs = sandbox.step(act("go_forward")).observation
    assert obs.data["url"] == site_url("shop", "/contact")
    result = sandbox.step(act("send_msg_to_user", text="All done"))
    assert result.observation.data["message"] == "All done" and not result.done
    result = sandbox.step(act("report_infeasible", reason="No such page"))
    assert result.observation.data["message"] == "No such page" and result.done


def test_tabs(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(lab("/popup")))
    obs = sandbox.step(act("click", bid=bid_of(obs, "Open in a new tab"))).observation
    assert [t["active"] for t in obs.data["tabs"]] == [False, True]
    assert obs.data["url"] == lab("/landed?via=popup")
    assert "Tabs: [0] Popup | [1] Landed (active)" in obs.text
    obs = sandbox.step(act("new_tab")).observation
    assert len(obs.data["tabs"]) == 3 and obs.data["url"] == "about:blank"
    obs = sandbox.step(act("tab_focus", index=0)).observation
    assert obs.data["title"] == "Popup" and obs.data["tabs"][0]["active"]
    obs = sandbox.step(act("tab_focus", index=7)).observation
    assert obs.data["last_action_error"] == "no tab with index 7: 3 tab(s) open"
    obs = sandbox.step(act("tab_close")).observation
    assert len(obs.data["tabs"]) == 2 and obs.data["tabs"][-1]["active"]


def test_missing_and_stale_bids_leave_the_page_unchanged(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(site_url("shop", "/")))
    result = sandbox.step(act("click", bid="9999"))
    after = result.observation
    assert after.data["last_action_error"] == "element with bid '9999' not found"
    assert "Error: element with bid '9999' not found" in after.text.split("\n\n")[0]
    assert after.data["url"] == obs.data["url"]
    assert after.text.split("\n\n", 1)[1] == obs.text.split("\n\n", 1)[1]
    assert sandbox.alive


def test_hidden_element_gives_an_error(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(lab("/widgets")))
    bid = bid_of(obs, "Name", "textbox")
    sandbox._page().evaluate("document.getElementById('name').style.display = 'none'")
    obs = sandbox.step(act("fill", bid=bid, value="x")).observation
    assert obs.data["last_action_error"] == f"element with bid {bid!r} is not visible"


def test_invalid_action_raises_and_the_episode_goes_on(sandbox: WebSandbox) -> None:
    sandbox.reset(task(site_url("shop", "/")))
    with pytest.raises(InvalidActionError):
        sandbox.step(Action(kind="click", arguments={"bid": ""}))
    assert sandbox.step(act("noop")).observation.data["url"] == site_url("shop", "/")


@pytest.mark.parametrize(("path", "via"), [("/timer?ms=1500", "timer"), ("/refresh", "refresh")])
def test_page_that_navigates_by_itself(sandbox: WebSandbox, path: str, via: str) -> None:
    obs = sandbox.reset(task(lab(path)))
    assert obs.data["url"] == lab(path)  # the first observation: settled before the timer fired
    obs = sandbox.step(act("noop", wait_ms=2500)).observation
    assert obs.data["url"] == lab(f"/landed?via={via}")
    assert f"StaticText 'Arrived by {via}.'" in obs.text


def test_slow_page_hits_the_settle_bound_and_says_so(sandbox: WebSandbox) -> None:
    sandbox.config.settle_timeout_ms = 600
    try:
        obs = sandbox.reset(task(lab("/slow?ms=3000")))
    finally:
        sandbox.config.settle_timeout_ms = WebConfig().settle_timeout_ms
    assert obs.data["settle"]["timed_out"] is True
    assert 550 <= obs.data["settle"]["waited_ms"] < 2500
    assert "heading 'Slow page'" in obs.text  # the document itself is there
    obs = sandbox.step(act("noop", wait_ms=3000)).observation
    assert obs.data["settle"]["timed_out"] is False


def test_slow_document_times_out_the_navigation_and_says_so(sandbox: WebSandbox) -> None:
    sandbox.reset(task(lab("/landed")))
    sandbox.config.settle_timeout_ms = 600
    try:
        result = sandbox.step(act("goto", url=lab("/slow-document?ms=2500")))
    finally:
        sandbox.config.settle_timeout_ms = WebConfig().settle_timeout_ms
    obs = result.observation
    assert obs.data["settle"]["timed_out"] is True and result.info["settle"]["timed_out"] is True
    assert obs.data["settle"]["waited_ms"] < 2000  # not the document's 2.5 s: the load was stopped
    assert obs.data["last_action_error"].startswith("goto timed out")
    assert obs.data["url"] == lab("/landed") and "StaticText 'Arrived by link.'" in obs.text
    # A link to the same slow document: the click happens, its navigation is stopped at the bound.
    obs = sandbox.reset(task(lab("/link?to=/slow-document%3Fms%3D2500")))
    sandbox.config.action_timeout_ms, sandbox.config.settle_timeout_ms = 300, 600
    try:
        obs = sandbox.step(act("click", bid=bid_of(obs, "Follow the link"))).observation
    finally:
        default = WebConfig()
        sandbox.config.action_timeout_ms, sandbox.config.settle_timeout_ms = (
            default.action_timeout_ms,
            default.settle_timeout_ms,
        )
    assert obs.data["last_action_error"] == (
        "click started a navigation that did not load in time (the settle bound is 600 ms): it was stopped;"
        " the page shown is the one it left"
    )
    assert obs.data["settle"]["timed_out"] is True and obs.data["settle"]["waited_ms"] < 2000
    assert obs.data["url"].startswith(lab("/link"))
    # Slower than the action timeout but within the settle bound: the navigation is waited for.
    obs = sandbox.reset(task(lab("/link?to=/slow-document%3Fms%3D800")))
    sandbox.config.action_timeout_ms = 300
    try:
        obs = sandbox.step(act("click", bid=bid_of(obs, "Follow the link"))).observation
    finally:
        sandbox.config.action_timeout_ms = WebConfig().action_timeout_ms
    assert obs.data["last_action_error"] == "" and obs.data["settle"]["timed_out"] is False
    assert obs.data["url"] == lab("/slow-document?ms=800") and "StaticText 'Finally here.'" in obs.text


def test_page_navigating_by_itself_to_a_slow_document_is_stopped_at_the_bound(sandbox: WebSandbox) -> None:
    sandbox.config.settle_timeout_ms = 700
    # A 0-ms timer starts the navigation before the 40-ms quiet window can end; a later timer would
    # race it, and a page quiet until its timer fires has rightly settled.
    try:
        obs = sandbox.reset(task(lab("/timer?ms=0&slow=3000")))
    finally:
        sandbox.config.settle_timeout_ms = WebConfig().settle_timeout_ms
    assert obs.data["settle"]["timed_out"] is True
    assert obs.data["settle"]["waited_ms"] < 2500  # the document would have taken 3 s
    assert obs.data["url"] == lab("/timer?ms=0&slow=3000")


def test_a_tree_too_slow_to_read_is_reported_not_fatal(sandbox: WebSandbox) -> None:
    sandbox.reset(task(site_url("docs", "/library/os.html")))
    sandbox.config.observe_timeout_ms = 1
    try:
        obs = sandbox.step(act("noop")).observation
    finally:
        sandbox.config.observe_timeout_ms = WebConfig().observe_timeout_ms
    assert obs.text.endswith("[... the accessibility tree was not read: it took longer than 1 ms]")
    assert obs.data["elements"] == [] and obs.data["url"] == site_url("docs", "/library/os.html")
    assert sandbox.step(act("click", bid="5")).observation.data["last_action_error"] == (
        "element with bid '5' not found"
    )


def test_busy_dom_hits_the_settle_bound(sandbox: WebSandbox) -> None:
    # A DOM changing every 5 ms is never quiet for 200 ms, even when a loaded machine delays timers.
    sandbox.config.settle_timeout_ms, sandbox.config.quiet_ms = 500, 200
    try:
        obs = sandbox.reset(task(lab("/mutating")))
    finally:
        default = WebConfig()
        sandbox.config.settle_timeout_ms, sandbox.config.quiet_ms = (
            default.settle_timeout_ms,
            default.quiet_ms,
        )
    assert obs.data["settle"]["timed_out"] is True
    assert "heading 'Mutating'" in obs.text


def test_form_validation_errors_are_in_the_tree(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(site_url("shop", "/signin")))
    obs = sandbox.step(act("fill", bid=bid_of(obs, "Email", "textbox"), value="not-an-email")).observation
    obs = sandbox.step(act("click", bid=bid_of(obs, "Sign in", "button"))).observation
    assert "alert" in obs.text
    assert "StaticText 'Enter an email address like name@example.com'" in obs.text
    assert "StaticText 'Enter your password'" in obs.text
    for field, value in (("Email", "alice@example.com"), ("Password", "wonderland")):
        obs = sandbox.step(act("fill", bid=bid_of(obs, field, "textbox"), value=value)).observation
    obs = sandbox.step(act("click", bid=bid_of(obs, "Sign in", "button"))).observation
    assert obs.data["url"] == site_url("shop", "/orders")
    assert "table 'Orders of Alice Liddell'" in obs.text


def test_modal_dialog_and_cart(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(site_url("shop", "/product/1")))
    obs = sandbox.step(act("select_option", bid=bid_of(obs, "Quantity", "combobox"), options="2")).observation
    obs = sandbox.step(act("click", bid=bid_of(obs, "Add to cart"))).observation
    assert obs.data["url"] == site_url("shop", "/cart?added=1")
    assert "link 'Cart (2)'" in obs.text
    obs = sandbox.step(act("click", bid=bid_of(obs, "Empty cart"))).observation
    assert "dialog 'Empty your cart?'" in obs.text
    obs = sandbox.step(act("click", bid=bid_of(obs, "Yes, empty it"))).observation
    assert "Your cart is empty." in obs.text and "link 'Cart (0)'" in obs.text


def test_each_reset_is_a_fresh_visitor(sandbox: WebSandbox) -> None:
    obs = sandbox.reset(task(site_url("shop", "/product/2")))
    obs = sandbox.step(act("click", bid=bid_of(obs, "Add to cart"))).observation
    assert "link 'Cart (1)'" in obs.text
    obs = sandbox.reset(task(site_url("shop", "/cart")))
    assert "Your cart is empty." in obs.text


def test_docs_site_and_screenshots(sandbox: WebSandbox) -> None:
    sandbox.config.screenshots = True
    try:
        obs = sandbox.reset(task(site_url("docs", "/library/index.html")))
    finally:
        sandbox.config.screenshots = False
    assert obs.data["title"].startswith("The Python Standard Library")
    (shot,) = [a for a in obs.attachments if a.name == "screenshot.png"]
    assert shot.media_type == "image/png" and shot.content and shot.content.startswith(b"\x89PNG")
    obs = sandbox.step(act("click", bid=bid_of(obs, "Built-in Functions", "link"))).observation
    assert obs.data["url"] == site_url("docs", "/library/functions.html")
    assert "heading 'Built-in Functions" in obs.text

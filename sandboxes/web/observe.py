"""One observation of the browser: header lines, the accessibility tree, data, attachments."""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from typing import TypeVar

from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from sandboxes.web.config import WebConfig
from sandboxes.web.page_events import event_lines
from sandboxes.web.settle import Settled
from sandboxes.web.tree import Tree, render_tree
from sandboxes.web.viewport import markers, read_viewport
from schemas.records import Attachment, Observation

FORMAT = "a11y_tree"
T = TypeVar("T")
# The title, the HTML, whether the page opened a tab since the last observation (flagged by
# settle.MUTATION_STAMP) and how many elements it has: read in one round trip. The HTML is null
# when the document is the one read last time (`[last token, new token]`) and has not changed
# since: serializing and sending a 2.5 MB page costs more than reading its viewport's tree.
_PAGE_FACTS = """([lastToken, newToken]) => {
  const state = window.__agentworldSettle;
  let html = null;
  if (!state || state.htmlToken !== lastToken || state.last > state.htmlAt) {
    const doctype = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '';
    html = doctype + (document.documentElement ? document.documentElement.outerHTML : '');
    if (state) { state.htmlToken = newToken; state.htmlAt = performance.now(); }
  }
  const popup = Boolean(state && state.popup);
  if (state) state.popup = false;
  return [document.title, html, popup, document.getElementsByTagName('*').length];
}"""
_tokens = itertools.count(1)
_last_html: weakref.WeakKeyDictionary[Page, tuple[int, str]] = weakref.WeakKeyDictionary()


def _page_facts(page: Page) -> tuple[str, str, bool, int]:
    """(title, HTML, opened a tab, element count), the HTML reused when the page did not change."""
    last_token, last_html = _last_html.get(page, (0, ""))
    token = next(_tokens)
    title, html, popup, elements = page.evaluate(_PAGE_FACTS, [last_token, token])
    if html is None:
        html = last_html
    else:
        _last_html[page] = (token, html)
    return title, html, popup, elements


def _title(page: Page) -> str:
    try:
        return page.title()
    except PlaywrightError as exc:
        if "Execution context was destroyed" in str(exc):
            return ""  # a navigation is replacing the document right now; the tree says what is there
        raise


def _retrying(page: Page, read: Callable[[], T], attempts: int = 3) -> T:
    """Run `read()`; a navigation that replaces the document meanwhile gets a short wait and a retry."""
    for attempt in range(attempts):
        try:
            return read()
        except PlaywrightError as exc:
            text = str(exc)
            moving = "Execution context was destroyed" in text or "navigating" in text
            if not moving or attempt == attempts - 1 or page.is_closed():
                raise
            page.wait_for_load_state("domcontentloaded", timeout=5000)
    raise AssertionError("unreachable")


def _read_tree(page: Page, config: WebConfig, title: str, elements: int) -> tuple[Tree, dict[str, str]]:
    """The tree and each bid's scope (see sandboxes.web.viewport): the whole page when it is small,
    else what lies in and near the viewport; a small page whose tree would be cut is read viewport
    first too, so that scrolling brings the rest into view."""
    limit, name_chars, bound = config.max_tree_lines, config.max_name_chars, config.observe_timeout_ms
    try:
        if elements <= config.viewport_first_elements:
            snapshot = _retrying(page, lambda: page.aria_snapshot(mode="ai", timeout=bound))
            tree = render_tree(snapshot, title, limit, name_chars)
            if not tree.truncated:
                return tree, {}
        view = _retrying(page, lambda: read_viewport(page, bound))
    except PlaywrightTimeoutError:
        # A page too slow to read in time: the agent sees that, and the episode goes on.
        tree = render_tree("", title, limit, name_chars)
        tree.text += f"\n[... the accessibility tree was not read: it took longer than {bound} ms]"
        return tree, {}
    above, below = markers(view)
    tree = render_tree(view.snapshot, title, limit, name_chars, before=above, after=below)
    scopes = {bid: view.scopes[ref] for bid, ref in tree.refs.items() if ref in view.scopes}
    return tree, scopes


def observe(
    context: BrowserContext,
    page: Page,
    config: WebConfig,
    settled: Settled,
    error: str,
    message: str = "",
    events: dict[str, list[dict]] | None = None,
) -> tuple[Observation, dict[str, str], dict[str, str], bool]:
    """The observation of `page` (the active tab), its bids' aria refs and scopes, and whether the
    page opened a tab since the last observation. `events`: what the guard blocked, the dialogs and
    the downloads since the last observation."""
    title, html, popup, elements = _retrying(page, lambda: _page_facts(page))
    tree, scopes = _read_tree(page, config, title, elements)
    tabs = []
    for index, tab in enumerate(context.pages):
        tab_title = title if tab is page else _title(tab)
        tabs.append({"index": index, "url": tab.url, "title": tab_title, "active": tab is page})
    active = {"url": page.url, "title": title}
    tab_line = " | ".join(
        f"[{t['index']}] {t['title'] or t['url']}" + (" (active)" if t["active"] else "") for t in tabs
    )
    header = [
        f"URL: {active['url']}",
        f"Title: {active['title']}",
        f"Tabs: {tab_line}",
        f"Focused: [{tree.focused_bid}]" if tree.focused_bid else "Focused: none",
    ]
    if settled.still_loading:
        header.append(
            f"Loading: still loading (shown as it stands after the {config.settle_timeout_ms} ms wait)"
        )
    if error:
        header.append(f"Error: {error}")
    events = events or {}
    blocked, dialogs, downloads = (events.get(k, []) for k in ("blocked", "dialogs", "downloads"))
    header += event_lines(blocked, dialogs, downloads)
    data = {
        "url": active["url"],
        "title": active["title"],
        "tabs": tabs,
        "focused_bid": tree.focused_bid,
        "elements": tree.elements,
        "settle": settled.as_data(),
        "last_action_error": error,
        "message": message,
        "tree_nodes": tree.node_count,
        "viewport_first": bool(scopes),
        "blocked": blocked,
        "dialogs": dialogs,
        "downloads": downloads,
    }
    attachments = [Attachment(name="page.html", media_type="text/html", content=html.encode())]
    if config.screenshots:
        shot = page.screenshot(timeout=config.observe_timeout_ms)
        attachments.append(Attachment(name="screenshot.png", media_type="image/png", content=shot))
    text = "\n".join(header) + "\n\n" + tree.text
    observation = Observation(format=FORMAT, text=text, data=data, attachments=attachments)
    return observation, tree.refs, scopes, popup

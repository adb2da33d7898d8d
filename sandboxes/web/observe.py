"""One observation of the browser: header lines, the accessibility tree, data, attachments."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from sandboxes.web.config import WebConfig
from sandboxes.web.settle import Settled
from sandboxes.web.tree import render_tree
from schemas.records import Attachment, Observation

FORMAT = "a11y_tree"
T = TypeVar("T")
# The title, the HTML, and whether the page opened a tab since the last observation (flagged by
# settle.MUTATION_STAMP; read here to spare a round trip).
_TITLE_HTML_POPUP = """() => {
  const doctype = document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '';
  const html = doctype + (document.documentElement ? document.documentElement.outerHTML : '');
  const state = window.__agentworldSettle;
  const popup = Boolean(state && state.popup);
  if (state) state.popup = false;
  return [document.title, html, popup];
}"""


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


def observe(
    context: BrowserContext, page: Page, config: WebConfig, settled: Settled, error: str, message: str = ""
) -> tuple[Observation, dict[str, str], bool]:
    """The observation of `page` (the active tab), its bids' aria refs, and whether the page opened
    a tab since the last observation."""
    try:
        snapshot = _retrying(page, lambda: page.aria_snapshot(mode="ai", timeout=config.observe_timeout_ms))
    except PlaywrightTimeoutError:
        # A page too large to read in time (the docs' full table of contents has ~100k nodes): the
        # agent sees that, and the episode goes on instead of failing.
        snapshot = None
    # One round trip for what page.title() and page.content() would read in two.
    title, html, popup = _retrying(page, lambda: page.evaluate(_TITLE_HTML_POPUP))
    tabs = []
    for index, tab in enumerate(context.pages):
        tab_title = title if tab is page else _title(tab)
        tabs.append({"index": index, "url": tab.url, "title": tab_title, "active": tab is page})
    active = {"url": page.url, "title": title}
    if snapshot is None:
        tree = render_tree("", active["title"], config.max_tree_lines, config.max_name_chars)
        tree.text += (
            f"\n[... the accessibility tree was not read: it took longer than {config.observe_timeout_ms} ms]"
        )
    else:
        tree = render_tree(snapshot, active["title"], config.max_tree_lines, config.max_name_chars)
    tab_line = " | ".join(
        f"[{t['index']}] {t['title'] or t['url']}" + (" (active)" if t["active"] else "") for t in tabs
    )
    header = [
        f"URL: {active['url']}",
        f"Title: {active['title']}",
        f"Tabs: {tab_line}",
        f"Focused: [{tree.focused_bid}]" if tree.focused_bid else "Focused: none",
    ]
    if error:
        header.append(f"Error: {error}")
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
    }
    attachments = [Attachment(name="page.html", media_type="text/html", content=html.encode())]
    if config.screenshots:
        shot = page.screenshot(timeout=config.observe_timeout_ms)
        attachments.append(Attachment(name="screenshot.png", media_type="image/png", content=shot))
    text = "\n".join(header) + "\n\n" + tree.text
    return Observation(format=FORMAT, text=text, data=data, attachments=attachments), tree.refs, popup

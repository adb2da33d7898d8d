"""Waiting for a page to settle after an action: navigation committed and loaded, no request in
flight, the DOM unchanged, all for a short quiet window, within an upper bound.

No fixed sleeps: an init script stamps the time of the document's last mutation, Playwright polls
the page (every 10 ms, in the page) until the load event and a quiet window have passed, and the
network side counts requests from Playwright's events. When the bound is reached, the page goes
on loading (a stream, a long poll, a slow image) and the observation shows it as it stands, marked
as still loading; only a main-frame navigation that has not answered yet is stopped, because until
it commits Playwright cannot read the page at all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from playwright.sync_api import BrowserContext, Page, Request
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

# Installed in every document before its own scripts: stamps each DOM mutation's time, and notes
# when the page opens a new tab (a link or form with a target, window.open), whose page event
# reaches Playwright later than the opener settles.
MUTATION_STAMP = """(() => {
  if (window.__agentworldSettle) return;
  const state = {last: performance.now(), popup: false};
  Object.defineProperty(window, '__agentworldSettle', {value: state});
  new MutationObserver(() => { state.last = performance.now(); })
    .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  document.addEventListener('click', event => {
    const owner = event.target instanceof Element && event.target.closest('a[target], area[target]');
    if (owner && !['', '_self', '_parent', '_top'].includes(owner.target)) state.popup = true;
  }, true);
  document.addEventListener('submit', event => {
    const target = event.target.target;
    if (target && !['_self', '_parent', '_top'].includes(target)) state.popup = true;
  }, true);
  const open = window.open;
  window.open = function (...args) { state.popup = true; return open.apply(this, args); };
})();"""

# True once the document has loaded and its DOM has been quiet for `quiet` ms. Polled by Playwright's
# wait_for_function, whose timeout holds even while a navigation is pending (a plain evaluate would
# wait for that navigation to commit, however long the server takes).
_SETTLED = """quiet => {
  if (document.readyState !== 'complete') return false;
  const state = window.__agentworldSettle;
  return !state || performance.now() - state.last >= quiet;
}"""

POLL_MS = 10


def stop_loading(page: Page) -> None:
    """Stop a pending navigation and the loads in flight, as a person would press Esc: until a
    navigation commits, the page cannot be read."""
    for attempt in (1, 2):
        session = page.context.new_cdp_session(page)
        try:
            session.send("Page.stopLoading")
            return
        except PlaywrightError as exc:
            # A navigation that moved the page to a new renderer detaches the session opened just
            # before (seen in make test); a session on the page as it is now stops the load.
            if attempt == 2 or "Not attached" not in str(exc):
                raise
        finally:
            try:
                session.detach()
            except PlaywrightError:
                pass  # already detached with the old renderer


STREAMING = frozenset({"eventsource", "websocket"})


class NetworkActivity:
    """Requests in flight in one browser context, from Playwright's request events."""

    def __init__(self, context: BrowserContext) -> None:
        self.in_flight: set[Request] = set()
        self.unanswered_navigations: set[Request] = set()  # main-frame documents without a response
        self.last_event = time.monotonic()
        context.on("request", self._started)
        context.on("response", lambda response: self.unanswered_navigations.discard(response.request))
        context.on("requestfinished", self._ended)
        context.on("requestfailed", self._ended)

    def _started(self, request: Request) -> None:
        if request.resource_type in STREAMING:
            return  # open for the life of the page: waiting for it to end would always time out
        self.in_flight.add(request)
        if frame_of_navigation(request) == "main":
            self.unanswered_navigations.add(request)
        self.last_event = time.monotonic()

    def _ended(self, request: Request) -> None:
        self.in_flight.discard(request)
        self.unanswered_navigations.discard(request)
        self.last_event = time.monotonic()

    def quiet_for(self) -> float:
        """Seconds since the last request started or ended, 0 while any is in flight."""
        return 0.0 if self.in_flight else time.monotonic() - self.last_event

    def navigation_pending(self, page: Page) -> bool:
        return any(r.frame == page.main_frame for r in self.unanswered_navigations)


def frame_of_navigation(request: Request) -> str:
    """ "main" or "frame" for a document request, "" for any other; the document of a tab being
    opened (whose frame Playwright does not know yet) is "popup"."""
    if not request.is_navigation_request():
        return ""
    try:
        return "main" if request.frame.parent_frame is None else "frame"
    except PlaywrightError:
        return "popup"


@dataclass
class Settled:
    waited_ms: int
    timed_out: bool
    still_loading: bool = False  # the bound passed and the page goes on loading

    def as_data(self) -> dict:
        return {"waited_ms": self.waited_ms, "timed_out": self.timed_out, "still_loading": self.still_loading}


def settle(page: Page, network: NetworkActivity, timeout_ms: int, quiet_ms: int) -> Settled:
    """Wait until `page` has settled or `timeout_ms` passed (then stop a navigation that has not
    answered; the rest goes on loading); Playwright errors other than a navigation replacing the
    document propagate (a closed page, a dead browser)."""
    started = time.monotonic()
    deadline = started + timeout_ms / 1000
    quiet = quiet_ms / 1000

    def result(timed_out: bool) -> Settled:
        still_loading = timed_out
        if timed_out and network.navigation_pending(page):
            stop_loading(page)
            still_loading = False
        return Settled(int((time.monotonic() - started) * 1000), timed_out, still_loading)

    while True:
        left_ms = (deadline - time.monotonic()) * 1000
        if left_ms <= 0:
            return result(True)
        try:
            page.wait_for_function(_SETTLED, arg=quiet_ms, polling=POLL_MS, timeout=left_ms)
        except PlaywrightTimeoutError:
            return result(True)
        except PlaywrightError as exc:
            if page.is_closed() or "Execution context was destroyed" not in str(exc):
                raise
            continue  # a navigation replaced the document mid-poll: poll the new one
        network_quiet = network.quiet_for()
        if network_quiet >= quiet:
            return result(False)
        # Requests are still moving: let Playwright deliver their events for a moment, then
        # check the document again (a response may have changed it).
        page.wait_for_timeout(max(1.0, min(quiet - network_quiet, deadline - time.monotonic()) * 1000))

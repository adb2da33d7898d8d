"""Waiting for a page to settle after an action: navigation committed and loaded, no request in
flight, the DOM unchanged, all for a short quiet window, within an upper bound.

No fixed sleeps: an init script stamps the time of the document's last mutation, a probe in the
page waits (with its own timers) until the load event and a quiet window have passed, and the
network side counts requests from Playwright's events. Whatever is still moving when the bound
is reached is reported (`timed_out`), and the observation is taken anyway.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from playwright.sync_api import BrowserContext, Page, Request
from playwright.sync_api import Error as PlaywrightError

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

# Resolves when the document has loaded and its DOM has been quiet for `quiet` ms, or at `budget`.
_PROBE = """async ({quiet, budget}) => {
  const started = performance.now();
  const left = () => budget - (performance.now() - started);
  const sleep = ms => new Promise(resolve => setTimeout(resolve, Math.max(0, ms)));
  if (document.readyState !== 'complete') {
    await new Promise(resolve => {
      window.addEventListener('load', resolve, {once: true});
      setTimeout(resolve, Math.max(0, left()));
    });
  }
  const state = window.__agentworldSettle;
  for (;;) {
    const idle = state ? performance.now() - state.last : quiet;
    const loaded = document.readyState === 'complete';
    if (loaded && idle >= quiet) {
      const popup = Boolean(state && state.popup);
      if (state) state.popup = false;
      return {settled: true, popup};
    }
    if (left() <= 0) return {settled: false, loaded};
    await sleep(Math.min(loaded ? quiet - idle : quiet, left()));
  }
}"""


STREAMING = frozenset({"eventsource", "websocket"})


class NetworkActivity:
    """Requests in flight in one browser context, from Playwright's request events."""

    def __init__(self, context: BrowserContext) -> None:
        self.in_flight: set[Request] = set()
        self.last_event = time.monotonic()
        context.on("request", self._started)
        context.on("requestfinished", self._ended)
        context.on("requestfailed", self._ended)

    def _started(self, request: Request) -> None:
        if request.resource_type in STREAMING:
            return  # open for the life of the page: waiting for it to end would always time out
        self.in_flight.add(request)
        self.last_event = time.monotonic()

    def _ended(self, request: Request) -> None:
        self.in_flight.discard(request)
        self.last_event = time.monotonic()

    def quiet_for(self) -> float:
        """Seconds since the last request started or ended, 0 while any is in flight."""
        return 0.0 if self.in_flight else time.monotonic() - self.last_event


@dataclass
class Settled:
    waited_ms: int
    timed_out: bool
    popup: bool = False  # the page opened a new tab meanwhile

    def as_data(self) -> dict:
        return {"waited_ms": self.waited_ms, "timed_out": self.timed_out}


def settle(page: Page, network: NetworkActivity, timeout_ms: int, quiet_ms: int) -> Settled:
    """Wait until `page` has settled or `timeout_ms` passed; Playwright errors other than a
    navigation replacing the document propagate (a closed page, a dead browser)."""
    started = time.monotonic()
    deadline = started + timeout_ms / 1000
    quiet = quiet_ms / 1000

    popup = False

    def result(timed_out: bool) -> Settled:
        return Settled(int((time.monotonic() - started) * 1000), timed_out, popup)

    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return result(True)
        try:
            probe = page.evaluate(_PROBE, {"quiet": quiet_ms, "budget": int(left * 1000)})
        except PlaywrightError as exc:
            if page.is_closed() or "Execution context was destroyed" not in str(exc):
                raise
            # A navigation replaced the document mid-probe: wait for the new one to parse.
            _wait_for_document(page, deadline)
            continue
        if not probe.get("settled"):
            continue  # the probe used up the budget; the loop reports the timeout
        popup = popup or bool(probe.get("popup"))
        network_quiet = network.quiet_for()
        if network_quiet >= quiet:
            return result(False)
        # Requests are still moving: let Playwright deliver their events for a moment, then
        # check the document again (a response may have changed it).
        page.wait_for_timeout(max(1.0, min(quiet - network_quiet, deadline - time.monotonic()) * 1000))


def _wait_for_document(page: Page, deadline: float) -> None:
    left_ms = (deadline - time.monotonic()) * 1000
    if left_ms <= 0:
        return
    try:
        page.wait_for_load_state("domcontentloaded", timeout=left_ms)
    except PlaywrightError as exc:
        if page.is_closed() or "Timeout" not in str(exc):
            raise

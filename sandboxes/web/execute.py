"""Carrying out one parsed web action on a browser context.

An action that cannot be done (a bid not in the last observation, a hidden element, a blocked or
refused URL, a timeout) raises `ActionFailed` with the message the agent sees; the page stays as
the action left it. Anything else a Playwright call raises (a dead browser, a closed context)
propagates, for the sandbox to decide whether the browser crashed.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from sandboxes.web.config import origin_of
from schemas.records import Action

ALLOWED_SCHEMES = ("http", "https")


class ActionFailed(Exception):
    """The action was well formed but could not be done; str(exc) is what the agent sees."""


class NavigationTimedOut(ActionFailed):
    """A navigation did not commit within the settle bound; the page may still be loading."""


NAVIGATIONS = ("goto", "go_back", "go_forward")
_TWO_FRAMES = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def check_url(url: str, allowed_origins: set[str]) -> None:
    """Refuse URLs the task does not allow: other schemes (file://, chrome://) and other origins."""
    if url == "about:blank":
        return
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise ActionFailed(
            f"cannot open {url!r}: only http and https URLs are allowed, not {scheme or 'none'!r}"
        )
    origin = origin_of(url)
    if origin not in allowed_origins:
        raise ActionFailed(f"cannot open {url!r}: origin {origin!r} is not allowed in this task")


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


class ActionRunner:
    """Runs actions on the active page of a context; the sandbox owns tabs and observations."""

    def __init__(
        self,
        active_page: Callable[[], Page],
        known_refs: Callable[[], dict[str, str]],
        allowed_origins: set[str],
        timeout_ms: int,
        navigation_timeout_ms: int,
        ref_scopes: Callable[[], dict[str, str]] = dict,
    ) -> None:
        self.active_page = active_page
        self.known_refs = known_refs
        self.ref_scopes = ref_scopes
        self.allowed_origins = allowed_origins
        self.timeout_ms = timeout_ms
        self.navigation_timeout_ms = max(1, navigation_timeout_ms)

    def element(self, bid: str) -> Locator:
        """The element of the last observation with this bid. Its presence and visibility are
        checked only when an action on it times out (see `_diagnose`): a check before every
        action would cost two browser round trips on the common path."""
        ref = self.known_refs().get(bid)
        if ref is None:
            raise ActionFailed(f"element with bid {bid!r} not found")
        scope = self.ref_scopes().get(bid)
        if scope is not None:
            # Shown by a viewport-first observation: refs resolve against the frame's last snapshot
            # only, so snapshot the element's block again (see sandboxes.web.viewport).
            try:
                self.active_page().locator(scope).aria_snapshot(mode="ai", timeout=self.timeout_ms)
            except PlaywrightTimeoutError as exc:
                raise ActionFailed(
                    f"element with bid {bid!r} not found (its part of the page is gone)"
                ) from exc
        return self.active_page().locator(f"aria-ref={ref}").first

    def _diagnose(self, bid: str) -> str | None:
        """Why an action on `bid` could not happen, if the element is gone or hidden."""
        ref = self.known_refs().get(bid)
        locator = self.active_page().locator(f"aria-ref={ref}")
        if locator.count() == 0:
            return f"element with bid {bid!r} not found"
        if not locator.first.is_visible():
            return f"element with bid {bid!r} is not visible"
        return None

    def run(self, action: Action) -> None:
        """Do `action`; ActionFailed with the agent's error message if it cannot be done."""
        handler = getattr(self, f"_do_{action.kind}", None)
        if handler is None:
            raise ActionFailed(f"action {action.kind!r} is not supported by this sandbox")
        try:
            handler(**action.arguments)
        except PlaywrightTimeoutError as exc:
            if action.kind in NAVIGATIONS:
                raise NavigationTimedOut(f"{action.kind} timed out: {_first_line(exc)}") from exc
            if _performed(exc):
                raise NavigationTimedOut(
                    f"{action.kind} started a navigation that did not load in time"
                ) from exc
            reason = self._diagnose(action.arguments["bid"]) if "bid" in action.arguments else None
            raise ActionFailed(reason or f"{action.kind} timed out: {_first_line(exc)}") from exc
        except PlaywrightError as exc:
            message = _first_line(exc)
            if "net::ERR_BLOCKED_BY_CLIENT" in message:
                raise ActionFailed(
                    f"navigation blocked: its origin is not allowed in this task ({message})"
                ) from exc
            if _is_action_problem(message):
                raise ActionFailed(message) from exc
            raise

    def _do_noop(self, wait_ms: int = 0) -> None:
        if wait_ms:
            self.active_page().wait_for_timeout(wait_ms)

    def _do_scroll(self, delta_x: float, delta_y: float) -> None:
        page = self.active_page()
        page.mouse.wheel(delta_x, delta_y)
        # The wheel event returns before the page has scrolled: two frames later it has.
        page.evaluate(_TWO_FRAMES)

    def _do_click(self, bid: str, button: str = "left", modifiers: list[str] | None = None) -> None:
        self.element(bid).click(button=button, modifiers=modifiers or None, timeout=self.timeout_ms)  # type: ignore[arg-type]

    def _do_dblclick(self, bid: str, button: str = "left") -> None:
        self.element(bid).dblclick(button=button, timeout=self.timeout_ms)  # type: ignore[arg-type]

    def _do_hover(self, bid: str) -> None:
        self.element(bid).hover(timeout=self.timeout_ms)

    def _do_fill(self, bid: str, value: str) -> None:
        self.element(bid).fill(value, timeout=self.timeout_ms)

    def _do_select_option(self, bid: str, options: str | list[str]) -> None:
        self.element(bid).select_option(options, timeout=self.timeout_ms)

    def _do_clear(self, bid: str) -> None:
        self.element(bid).clear(timeout=self.timeout_ms)

    def _do_focus(self, bid: str) -> None:
        self.element(bid).focus(timeout=self.timeout_ms)

    def _do_press(self, bid: str, key_comb: str) -> None:
        self.element(bid).press(key_comb, timeout=self.timeout_ms)

    def _do_keyboard_press(self, key: str) -> None:
        self.active_page().keyboard.press(key)

    def _do_keyboard_type(self, text: str) -> None:
        self.active_page().keyboard.type(text)

    def _do_mouse_move(self, x: float, y: float) -> None:
        self.active_page().mouse.move(x, y)

    def _do_mouse_click(self, x: float, y: float, button: str = "left") -> None:
        self.active_page().mouse.click(x, y, button=button)  # type: ignore[arg-type]

    def _do_mouse_dblclick(self, x: float, y: float, button: str = "left") -> None:
        self.active_page().mouse.dblclick(x, y, button=button)  # type: ignore[arg-type]

    def _do_goto(self, url: str) -> None:
        check_url(url, self.allowed_origins)
        self.active_page().goto(url, wait_until="commit", timeout=self.navigation_timeout_ms)

    def _do_go_back(self) -> None:
        self.active_page().go_back(wait_until="commit", timeout=self.navigation_timeout_ms)

    def _do_go_forward(self) -> None:
        self.active_page().go_forward(wait_until="commit", timeout=self.navigation_timeout_ms)

    # Tabs, messages: the sandbox handles them (they change which page is active or end nothing).


def _performed(exc: BaseException) -> bool:
    """Whether Playwright's call log says the input went through and a navigation it started was
    still pending when the time ran out."""
    log = [line.strip() for line in str(exc).splitlines() if line.strip().startswith("- ")]
    return bool(log) and log[-1].startswith("- waiting for scheduled navigations")


def _is_action_problem(message: str) -> bool:
    """Playwright errors that describe the action or the page, not a dead browser."""
    fatal = ("has been closed", "Target closed", "Browser closed", "Connection closed", "crashed")
    return not any(marker in message for marker in fatal)

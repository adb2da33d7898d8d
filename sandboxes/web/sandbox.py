"""The web sandbox: one headless Chromium per sandbox, a fresh browser context per episode.

Playwright's sync API belongs to the thread that started it, so start, reset, step and close run
on the worker thread that owns the sandbox; close() from any other thread (a runner aborting)
kills the browser's processes instead, which is safe at any moment.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

from playwright.sync_api import BrowserContext, Page
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from sandboxes.base import (
    Sandbox,
    SandboxClosedError,
    SandboxCrashedError,
    SandboxError,
    StepResult,
    VerifierError,
)
from sandboxes.checks import process_exists
from sandboxes.containment import sandbox_tmpdir
from sandboxes.http_server import LocalHTTPServer
from sandboxes.web.actions import parse_action
from sandboxes.web.browser import LaunchedBrowser, launch
from sandboxes.web.config import DEFAULT_START_URL, WebConfig, origin_of
from sandboxes.web.execute import ActionFailed, ActionRunner, NavigationTimedOut, check_url
from sandboxes.web.guard import OriginGuard
from sandboxes.web.observe import observe
from sandboxes.web.page_events import PageEvents
from sandboxes.web.proxy import RefusingProxy
from sandboxes.web.settle import MUTATION_STAMP, NetworkActivity, Settled, settle, stop_loading
from sandboxes.web.sites import start_sites_server
from sandboxes.web.verify import VERIFIER_KINDS, verify_web
from schemas.records import Action, Environment, Observation, Step, Task, Verification

TAB_KINDS = ("new_tab", "tab_focus", "tab_close")
# How long the start page of an episode may take to answer. Longer than the settle bound on
# purpose: a slow start page is shown as it loads; one that never answers fails the reset.
START_TIMEOUT_MS = 30_000


class StartPageFailed(SandboxError):
    """The task's start URL could not be loaded (unreachable, refused, too slow): the episode is an
    error, not a walk over Chromium's error page."""


class WebSandbox(Sandbox):
    domain = "web"

    def __init__(self, config: WebConfig | None = None, guard: bool = True) -> None:
        """`guard=False` lets the browser reach any origin: only for measuring the guard's cost."""
        self.config = config or WebConfig()
        self._guarded = guard
        self._owner = threading.get_ident()
        self._browser: LaunchedBrowser | None = None
        self._server: LocalHTTPServer | None = None
        self._context: BrowserContext | None = None
        self._network: NetworkActivity | None = None
        self._active: Page | None = None
        self._refs: dict[str, str] = {}
        self._scopes: dict[str, str] = {}
        self._allowed: set[str] = set()
        self._crashed = False
        self._closed = False
        self._proxy: RefusingProxy | None = None
        self._guard = OriginGuard(set(), None)
        self._downloads_dir: Path | None = None
        self._events = PageEvents(self.config, Path(tempfile.gettempdir()))

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._closed:
            raise SandboxClosedError("the web sandbox was closed; make a new one")
        if self._browser is not None:
            return
        self._owner = threading.get_ident()
        port = self.config.sites_port
        if port is None:
            self._server = start_sites_server()
            port = self._server.port
        self._browser = launch(self.config, port)  # first: a browser that cannot start leaves nothing
        if self._guarded:
            self._proxy = RefusingProxy()
        self._downloads_dir = Path(sandbox_tmpdir("web-downloads"))

    @property
    def downloads_dir(self) -> Path | None:
        """The sandbox's own folder for downloads (removed at close)."""
        return self._downloads_dir

    @property
    def alive(self) -> bool:
        return (
            self._browser is not None and not self._closed and not self._crashed and not self._browser.dead()
        )

    def resources(self) -> list[str]:
        return [f"pid:{pid}" for pid in self._browser.pids()] if self._browser else []

    def describe(self) -> Environment:
        return Environment(name="web", backend="chromium", config=self.config.recorded())

    def close(self) -> None:
        browser = self._browser
        if threading.get_ident() != self._owner:
            # Playwright's objects belong to the owner thread: kill the browser, and let the owner's
            # next call (which now fails) or its own close() release the rest.
            self._closed = True
            if browser is not None:
                browser.kill()
        else:
            self._closed = True
            if browser is not None:
                browser.release()
                _wait_gone(browser.pid, timeout_s=5.0)
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = None
        if self._downloads_dir is not None:
            shutil.rmtree(self._downloads_dir, ignore_errors=True)
            self._downloads_dir = None

    # -- episodes --------------------------------------------------------------------------------

    def reset(self, task: Task) -> Observation:
        browser = self._require()
        metadata = task.metadata or {}
        origins = metadata.get("allowed_origins") or self.config.allowed_origins
        self._allowed = {origin_of(o) or o for o in origins}
        start_url = metadata.get("start_url") or DEFAULT_START_URL
        try:
            check_url(start_url, self._allowed)
        except ActionFailed as exc:
            raise ValueError(f"task {task.id}: start_url {exc}") from exc
        with self._crash_guard():
            if self._context is not None:
                self._context.close()
            self._guard = OriginGuard(self._allowed, self._proxy)
            assert self._downloads_dir is not None
            self._events = PageEvents(self.config, self._downloads_dir)
            self._context = browser.browser.new_context(
                viewport={"width": self.config.viewport_width, "height": self.config.viewport_height},
                accept_downloads=self.config.downloads == "save",
                service_workers="block",  # their requests would pass beside Playwright's events
                proxy=self._guard.proxy_settings() if self._guarded else None,  # type: ignore[arg-type]
            )
            self._context.add_init_script(MUTATION_STAMP)
            if self._guarded:
                self._context.on("request", self._guard.on_request)
            self._network = NetworkActivity(self._context)
            self._context.on("page", self._on_new_page)
            self._active = self._context.new_page()
            self._refs, self._scopes = {}, {}
            started = time.monotonic()
            try:
                self._runner(START_TIMEOUT_MS).run(parse_action("goto", {"url": start_url}))
            except NavigationTimedOut as exc:
                raise StartPageFailed(
                    f"start URL {start_url} did not answer within {START_TIMEOUT_MS} ms ({exc})"
                ) from exc
            except ActionFailed as exc:
                reason = str(exc)
                for record in self._guard.drain():
                    reason += f"; blocked {record['kind']} to {record['url']}: {record['reason']}"
                raise StartPageFailed(f"start URL {start_url} could not be loaded: {reason}") from exc
            settled = self._settle()
            settled.waited_ms = int((time.monotonic() - started) * 1000)
            return self._observe(settled, "", "", self._drain_events())

    def step(self, action: Action) -> StepResult:
        self._require()
        if self._context is None:
            raise SandboxClosedError("reset() must be called before step()")
        action = parse_action(action.kind, action.arguments)
        with self._crash_guard():
            pages_before = len(self._context.pages)
            error, message = "", ""
            started = time.monotonic()
            try:
                if action.kind in TAB_KINDS:
                    self._tab_action(action)
                elif action.kind in ("send_msg_to_user", "report_infeasible"):
                    message = action.arguments.get("text") or action.arguments.get("reason") or ""
                else:
                    self._runner().run(action)
            except NavigationTimedOut as exc:
                if not self._commits_in_time(started):
                    # No answer yet: until the navigation commits the page cannot be read, so it is
                    # stopped, and the observation shows the page that stands (see settle.py).
                    stop_loading(self._page())
                    error = (
                        f"{exc} (the settle bound is {self.config.settle_timeout_ms} ms): it was stopped;"
                        " the page shown is the one it left"
                    )
                    settled = Settled(int((time.monotonic() - started) * 1000), timed_out=True)
                    events = self._drain_events()
                    observation = self._observe(settled, error, "", events)
                    return StepResult(observation, info=self._info(settled, events))
            except ActionFailed as exc:
                error = str(exc)
            settled = self._settle()
            events = self._drain_events()
            if not error:
                navigation = next((r for r in events["blocked"] if r["kind"] == "navigation"), None)
                if navigation is not None:
                    error = f"navigation to {navigation['url']!r} blocked: {navigation['reason']}"
            observation, popup = self._observe_with_popup(settled, error, message, events)
            if action.kind not in TAB_KINDS and (popup or len(self._context.pages) > pages_before):
                # A tab the action opened takes the focus, as it would for a person. Its page event
                # may reach Playwright after the opener has settled: wait for it within the bound.
                if len(self._context.pages) == pages_before:
                    self._wait_for_popup(settled)
                if len(self._context.pages) > pages_before:
                    self._active = self._context.pages[-1]
                    settled = self._settle()
                    more = self._drain_events()
                    events = {kind: events[kind] + more[kind] for kind in events}
                    observation = self._observe(settled, error, message, events)
        return StepResult(
            observation, done=action.kind == "report_infeasible", info=self._info(settled, events)
        )

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        """`site_state` (the shop's server-side state for this episode's session cookie) and
        `page_url` (where the episode ended); see sandboxes.web.verify."""
        if task.verifier.get("kind") not in VERIFIER_KINDS:
            return super().verify(task, steps)
        self._require()
        if self._context is None:
            raise VerifierError("the web sandbox has no episode to verify: reset it first")
        port = self.config.sites_port if self.config.sites_port is not None else self._server_port()
        with self._crash_guard():
            return verify_web(task.verifier, list(self._context.cookies()), port, self._page().url)

    def _server_port(self) -> int:
        assert self._server is not None
        return self._server.port

    @staticmethod
    def _info(settled: Settled, events: dict[str, list[dict]]) -> dict:
        return {"settle": settled.as_data(), **events}

    def _drain_events(self) -> dict[str, list[dict]]:
        """What the guard refused, the dialogs and the downloads since the last observation."""
        dialogs, downloads = self._events.drain()
        return {"blocked": self._guard.drain(), "dialogs": dialogs, "downloads": downloads}

    # -- internals -------------------------------------------------------------------------------

    def _require(self) -> LaunchedBrowser:
        if self._closed or self._browser is None:
            raise SandboxClosedError("the web sandbox is closed or was never started")
        if self._crashed or self._browser.dead():
            self._crashed = True
            raise SandboxCrashedError("the browser process is gone (crashed or killed)")
        return self._browser

    def _crash_guard(self) -> _CrashGuard:
        return _CrashGuard(self)

    def _runner(self, navigation_timeout_ms: int | None = None) -> ActionRunner:
        return ActionRunner(
            active_page=self._page,
            known_refs=lambda: self._refs,
            allowed_origins=self._allowed,
            timeout_ms=self.config.action_timeout_ms,
            navigation_timeout_ms=navigation_timeout_ms or self.config.settle_timeout_ms,
            ref_scopes=lambda: self._scopes,
        )

    def _page(self) -> Page:
        assert self._context is not None
        if self._active is None or self._active.is_closed():
            pages = self._context.pages
            self._active = pages[-1] if pages else self._context.new_page()
        return self._active

    def _on_new_page(self, page: Page) -> None:
        page.on("crash", lambda _page: setattr(self, "_crashed", True))
        page.on("dialog", self._events.on_dialog)
        page.on("download", self._events.on_download)
        if self._guarded:
            page.on("websocket", self._guard.on_websocket)
            page.on("console", self._guard.on_console)

    def _tab_action(self, action: Action) -> None:
        assert self._context is not None
        if action.kind == "new_tab":
            self._active = self._context.new_page()
        elif action.kind == "tab_focus":
            pages = self._context.pages
            index = action.arguments["index"]
            if index >= len(pages):
                raise ActionFailed(f"no tab with index {index}: {len(pages)} tab(s) open")
            self._active = pages[index]
            self._active.bring_to_front()
        else:
            self._page().close()
            self._active = None
            self._page().bring_to_front()  # the last remaining tab, or a new blank one
        self._refs, self._scopes = {}, {}

    def _wait_for_popup(self, settled: Settled) -> None:
        """The page opened a tab that Playwright has not reported yet: wait for it, within what is
        left of the settle bound."""
        assert self._context is not None
        left_ms = self.config.settle_timeout_ms - settled.waited_ms
        if left_ms <= 0:
            return
        try:
            self._context.wait_for_event("page", timeout=left_ms)
        except PlaywrightTimeoutError:
            pass  # a popup the browser blocked, or one still opening: the observation shows the opener

    def _commits_in_time(self, started: float) -> bool:
        """An element action's navigation outlived the action timeout: give it what is left of the
        settle bound to commit (goto and history moves had the whole bound already)."""
        page = self._page()
        left_ms = self.config.settle_timeout_ms - (time.monotonic() - started) * 1000
        if left_ms <= 0:
            return False
        try:
            page.wait_for_event("framenavigated", lambda frame: frame == page.main_frame, timeout=left_ms)
        except PlaywrightTimeoutError:
            return False
        return True

    def _settle(self) -> Settled:
        assert self._network is not None
        return settle(self._page(), self._network, self.config.settle_timeout_ms, self.config.quiet_ms)

    def _observe(
        self, settled: Settled, error: str, message: str, events: dict[str, list[dict]]
    ) -> Observation:
        return self._observe_with_popup(settled, error, message, events)[0]

    def _observe_with_popup(
        self, settled: Settled, error: str, message: str, events: dict[str, list[dict]]
    ) -> tuple[Observation, bool]:
        assert self._context is not None
        observation, refs, scopes, popup = observe(
            self._context, self._page(), self.config, settled, error, message, events
        )
        self._refs, self._scopes = refs, scopes
        return observation, popup


class _CrashGuard:
    """Turns Playwright errors caused by a dead browser or renderer into SandboxCrashedError."""

    def __init__(self, sandbox: WebSandbox) -> None:
        self.sandbox = sandbox

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        sandbox = self.sandbox
        if exc is None or not isinstance(exc, PlaywrightError):
            return
        browser = sandbox._browser
        if sandbox._crashed or browser is None or browser.dead() or _looks_dead(str(exc)):
            sandbox._crashed = True
            raise SandboxCrashedError(f"the browser died: {str(exc).splitlines()[0]}") from exc


def _looks_dead(message: str) -> bool:
    return any(marker in message for marker in ("has been closed", "Target crashed", "Connection closed"))


def _wait_gone(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while process_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.02)

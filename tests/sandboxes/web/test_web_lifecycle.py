"""Browser lifecycle: a killed browser, a close from another thread (a runner aborting), the leak check."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from sandboxes.base import SandboxClosedError, SandboxCrashedError
from sandboxes.checks import process_exists
from sandboxes.web import WebConfig, WebSandbox, site_url
from tests.sandboxes.web.conftest import act, require_chromium, task

pytestmark = pytest.mark.chromium


def test_killed_browser_raises_crashed_and_is_not_alive() -> None:
    require_chromium()
    sandbox = WebSandbox(WebConfig())
    sandbox.start()
    try:
        sandbox.reset(task(site_url("shop", "/")))
        pid = int(sandbox.resources()[0].split(":")[1])
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SandboxCrashedError):
            sandbox.step(act("noop"))
        assert not sandbox.alive
        with pytest.raises(SandboxCrashedError):
            sandbox.reset(task(site_url("shop", "/")))
    finally:
        held = sandbox.resources()
        sandbox.close()
    assert not any(process_exists(int(r.split(":")[1])) for r in held)
    with pytest.raises(SandboxClosedError):
        sandbox.step(act("noop"))


def test_close_from_another_thread_kills_the_browser() -> None:
    require_chromium()
    ready, go_on = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def worker() -> None:  # owns the sandbox, as a fleet runner's worker thread does
        sandbox = WebSandbox(WebConfig())
        sandbox.start()
        sandbox.reset(task(site_url("shop", "/")))
        seen["sandbox"] = sandbox
        ready.set()
        go_on.wait(60)
        try:
            sandbox.step(act("noop"))
        except (SandboxClosedError, SandboxCrashedError) as exc:
            seen["error"] = exc
        sandbox.close()  # the owner releases its Playwright driver
        seen["closed"] = True

    thread = threading.Thread(target=worker)
    thread.start()
    assert ready.wait(120), "the worker did not get its sandbox ready"
    sandbox = seen["sandbox"]
    assert isinstance(sandbox, WebSandbox)
    pid = int(sandbox.resources()[0].split(":")[1])
    sandbox.close()  # from the main thread, while the worker waits
    deadline = time.monotonic() + 10
    while process_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_exists(pid)
    assert not sandbox.alive
    go_on.set()
    thread.join(60)
    assert isinstance(seen.get("error"), SandboxClosedError) and seen.get("closed") is True

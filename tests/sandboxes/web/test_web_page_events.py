"""Dialogs and downloads: answered or saved by the configured policy, and recorded in the
observation and the step's info."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sandboxes.web import WebSandbox
from tests.sandboxes.web.conftest import act, bid_of, task
from tests.sandboxes.web.live_server import live_server

pytestmark = pytest.mark.chromium

DIALOGS = """<!DOCTYPE html><title>Dialogs</title>
<button onclick="alert('Saved!')">Alert</button>
<button onclick="document.title = 'confirm=' + confirm('Delete it?')">Confirm</button>
<button onclick="document.title = 'prompt=' + prompt('Your name?', 'Ann')">Prompt</button>
<a href="/other">Leave</a>
<script>addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = ''; });</script>"""
OTHER = "<!DOCTYPE html><title>Other page</title><p>Left</p>"
DOWNLOAD = """<!DOCTYPE html><title>Files</title>
<a href="data:text/csv,id%2Cname%0A1%2CAnn%0A" download="report.csv">Get report</a>"""


@contextmanager
def configured(sandbox: WebSandbox, **settings: object) -> Iterator[None]:
    """The module's sandbox with some config changed for one test."""
    before = {name: getattr(sandbox.config, name) for name in settings}
    for name, value in settings.items():
        setattr(sandbox.config, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(sandbox.config, name, value)


def click(sandbox: WebSandbox, name: str) -> tuple[str, dict]:
    """(observation text, info) of clicking the element named `name` on the current page."""
    obs = sandbox.step(act("noop")).observation
    result = sandbox.step(act("click", bid=bid_of(obs, name)))
    return result.observation.text, result.info


def test_each_dialog_kind_is_recorded_with_its_resolution(sandbox: WebSandbox) -> None:
    with live_server({"/": DIALOGS, "/other": OTHER}) as server:
        sandbox.reset(task(server.url("/"), allowed=[server.origin]))
        text, info = click(sandbox, "Alert")
        assert info["dialogs"] == [
            {"kind": "alert", "message": "Saved!", "default_text": "", "resolution": "accepted"}
        ]
        assert "Dialog: alert 'Saved!' -> accepted" in text
        text, info = click(sandbox, "Confirm")
        assert info["dialogs"][0]["resolution"] == "accepted" and "Title: confirm=true" in text
        assert "Dialog: confirm 'Delete it?' -> accepted" in text
        text, info = click(sandbox, "Prompt")
        assert info["dialogs"] == [
            {
                "kind": "prompt",
                "message": "Your name?",
                "default_text": "Ann",
                "resolution": "accepted with 'Ann'",
            }
        ]
        assert "Dialog: prompt 'Your name?' (default 'Ann') -> accepted with 'Ann'" in text
        text, info = click(sandbox, "Leave")  # the page asks before it is left; accepted: it goes
        assert [d["kind"] for d in info["dialogs"]] == ["beforeunload"]
        assert info["dialogs"][0]["resolution"] == "accepted" and "Title: Other page" in text


def test_the_dismiss_policy_and_a_prompt_answer_are_applied(sandbox: WebSandbox) -> None:
    with live_server({"/": DIALOGS, "/other": OTHER}) as server:
        with configured(sandbox, dialog_policy="dismiss"):
            sandbox.reset(task(server.url("/"), allowed=[server.origin]))
            text, info = click(sandbox, "Confirm")
            assert info["dialogs"][0]["resolution"] == "dismissed" and "Title: confirm=false" in text
            text, info = click(sandbox, "Leave")  # dismissed: the page stays
            assert info["dialogs"][0]["kind"] == "beforeunload"
            assert "Dialog: beforeunload '' -> dismissed" in text and "Title: confirm=false" in text
        with configured(sandbox, prompt_text="Bob"):
            sandbox.reset(task(server.url("/"), allowed=[server.origin]))
            text, info = click(sandbox, "Prompt")
            assert info["dialogs"][0]["resolution"] == "accepted with 'Bob'" and "Title: prompt=Bob" in text


def test_a_download_is_saved_and_announced(sandbox: WebSandbox) -> None:
    with live_server({"/": DOWNLOAD}) as server:
        sandbox.reset(task(server.url("/"), allowed=[server.origin]))
        text, info = click(sandbox, "Get report")
    (record,) = info["downloads"]
    assert record["saved"] is True and record["file"] == "report.csv" and record["size"] == 14
    assert info["blocked"] == []  # a data: URL never reaches the network: nothing to refuse
    assert "Download: report.csv (14 bytes) saved" in text
    assert sandbox.downloads_dir is not None
    assert (sandbox.downloads_dir / "report.csv").read_text() == "id,name\n1,Ann\n"


def test_a_refused_download_says_so(sandbox: WebSandbox) -> None:
    with live_server({"/": DOWNLOAD}) as server, configured(sandbox, downloads="refuse"):
        sandbox.reset(task(server.url("/"), allowed=[server.origin]))
        text, info = click(sandbox, "Get report")
    (record,) = info["downloads"]
    assert record["saved"] is False and record["name"] == "report.csv"
    assert "Download: report.csv not saved: downloads are refused in this sandbox" in text


def test_a_download_still_arriving_at_the_bound_is_cancelled_and_says_so(sandbox: WebSandbox) -> None:
    page = '<!DOCTYPE html><title>Files</title><a href="/trickle.bin">Get the archive</a>'
    with live_server({"/": page}) as server, configured(sandbox, download_timeout_ms=1500):
        sandbox.reset(task(server.url("/"), allowed=[server.origin]))
        started = time.monotonic()
        text, info = click(sandbox, "Get the archive")
        took = time.monotonic() - started
    (record,) = info["downloads"]
    assert record["saved"] is False and record["reason"] == "still arriving after 1.5 s: cancelled"
    assert "Download: trickle.bin not saved: still arriving after 1.5 s: cancelled" in text
    assert took < 10, took  # bounded, not the minute the server would go on sending
    assert sandbox.downloads_dir is not None and not (sandbox.downloads_dir / "trickle.bin").exists()

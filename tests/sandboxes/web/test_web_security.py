"""What a web episode may reach: the task's allowed origins only, never file://."""

from __future__ import annotations

import urllib.parse

import pytest

from sandboxes.http_server import LocalHTTPServer, Request, Response
from sandboxes.web import WebSandbox, default_allowed_origins, site_url
from tests.sandboxes.web.conftest import act, bid_of, lab, task

pytestmark = pytest.mark.chromium


def test_link_to_another_origin_is_blocked_with_an_error(
    sandbox: WebSandbox, external_server: LocalHTTPServer
) -> None:
    target = external_server.url("/secret")
    obs = sandbox.reset(task(lab(f"/link?to={target}")))
    obs = sandbox.step(act("click", bid=bid_of(obs, "Follow the link"))).observation
    origin = external_server.url("").rstrip("/")
    expected = f"navigation to {target!r} blocked: origin {origin!r} is not allowed in this task"
    assert obs.data["last_action_error"] == expected
    assert "External site" not in obs.text
    assert f"Blocked: navigation to {target} (origin {origin!r} is not allowed in this task)" in obs.text


def test_goto_another_origin_is_refused(sandbox: WebSandbox, external_server: LocalHTTPServer) -> None:
    sandbox.reset(task(site_url("shop", "/")))
    obs = sandbox.step(act("goto", url=external_server.url("/"))).observation
    origin = external_server.url("").rstrip("/")
    assert obs.data["last_action_error"] == (
        f"cannot open {external_server.url('/')!r}: origin {origin!r} is not allowed in this task"
    )
    assert obs.data["url"] == site_url("shop", "/")


def test_a_task_that_allows_an_origin_reaches_it(
    sandbox: WebSandbox, external_server: LocalHTTPServer
) -> None:
    target = external_server.url("/welcome")
    allowed = [*default_allowed_origins(), external_server.url("")]
    obs = sandbox.reset(task(lab(f"/link?to={target}"), allowed=allowed))
    obs = sandbox.step(act("click", bid=bid_of(obs, "Follow the link"))).observation
    assert obs.data["last_action_error"] == "", obs.text
    assert obs.data["url"] == target, (obs.data["settle"], obs.text)
    assert "StaticText 'You asked for /welcome'" in obs.text
    # The next episode is back to the default: the task's allowance does not leak.
    sandbox.reset(task(site_url("shop", "/")))
    obs = sandbox.step(act("goto", url=target)).observation
    assert "is not allowed in this task" in obs.data["last_action_error"]


def test_redirect_to_a_disallowed_origin_is_blocked(
    sandbox: WebSandbox, external_server: LocalHTTPServer
) -> None:
    hits: list[str] = []

    def third_party(request: Request) -> Response:
        hits.append(request.path)
        return Response(200, "<title>Third</title><p>Third party</p>")

    with LocalHTTPServer({"/": third_party}) as third:
        hop = external_server.url(f"/hop?to={third.url('/tracked')}")
        allowed = [*default_allowed_origins(), external_server.url("")]
        obs = sandbox.reset(task(lab(f"/link?to={urllib.parse.quote(hop)}"), allowed=allowed))
        obs = sandbox.step(act("click", bid=bid_of(obs, "Follow the link"))).observation
        assert hits == []
        assert obs.data["last_action_error"].startswith(f"navigation to {third.url('/tracked')!r} blocked")
        # A redirect within the allowed origins is followed as usual.
        inner = external_server.url(f"/hop?to={external_server.url('/arrived')}")
        obs = sandbox.step(act("goto", url=inner)).observation
        assert obs.data["url"] == external_server.url("/arrived") and obs.data["last_action_error"] == ""
        assert "StaticText 'You asked for /arrived'" in obs.text


def test_file_urls_are_refused(sandbox: WebSandbox) -> None:
    sandbox.reset(task(site_url("shop", "/")))
    obs = sandbox.step(act("goto", url="file:///etc/passwd")).observation
    assert obs.data["last_action_error"] == (
        "cannot open 'file:///etc/passwd': only http and https URLs are allowed, not 'file'"
    )
    assert "root:" not in obs.text
    obs = sandbox.reset(task(lab("/file-link")))
    obs = sandbox.step(act("click", bid=bid_of(obs, "Local file"))).observation
    assert obs.data["url"] == lab("/file-link")
    assert "root:" not in obs.text
    with pytest.raises(ValueError, match="only http and https"):
        sandbox.reset(task("file:///etc/passwd"))


def test_a_task_can_narrow_the_embedded_sites(sandbox: WebSandbox) -> None:
    only_shop = [site_url("shop", "")]
    sandbox.reset(task(site_url("shop", "/"), allowed=only_shop))
    obs = sandbox.step(act("goto", url=site_url("docs", "/"))).observation
    assert "origin 'http://docs.agentworld.test' is not allowed" in obs.data["last_action_error"]
    # The page itself cannot reach the other site either: the guard aborts the request (an opaque
    # no-cors fetch would resolve if the request had gone through).
    fetched = sandbox._page().evaluate(
        "() => fetch('http://docs.agentworld.test/index.html', {mode: 'no-cors'})"
        ".then(() => 'reached', () => 'blocked')"
    )
    assert fetched == "blocked"
    sandbox.reset(task(site_url("shop", "/")))  # with the default origins the same fetch goes through
    reached = sandbox._page().evaluate(
        "() => fetch('http://docs.agentworld.test/index.html', {mode: 'no-cors'})"
        ".then(() => 'reached', () => 'blocked')"
    )
    assert reached == "reached"

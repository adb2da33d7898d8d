"""Fixtures for the web sandbox tests: real Chromium, real loopback HTTP servers; one browser per module."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from sandboxes.checks import resource_exists
from sandboxes.http_server import LocalHTTPServer, Request, Response
from sandboxes.web import WebConfig, WebSandbox, site_url, start_sites_server
from schemas.records import Action, Observation, Task


def require_chromium() -> None:
    if not os.path.exists("/usr/bin/chromium"):
        pytest.fail("Chromium is missing: apt-get install chromium (never `playwright install`)")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[WebSandbox]:
    """One started sandbox for the whole module, on a sites server it shares, as a collector's
    browsers do (test_check_sandbox_passes covers a sandbox starting its own)."""
    require_chromium()
    server = start_sites_server()
    made = WebSandbox(WebConfig(sites_port=server.port))
    made.start()
    held = set(made.resources())
    yield made
    made.close()
    server.close()
    leaked = sorted(r for r in held if resource_exists(r))
    assert not leaked, f"browser processes survived close(): {leaked}"


@pytest.fixture(scope="module")
def external_server() -> Iterator[LocalHTTPServer]:
    """A second server standing in for a site outside the embedded ones (another origin)."""

    def app(request: Request) -> Response:
        if request.path == "/hop":  # redirects wherever ?to= says
            return Response(302, "", headers={"Location": request.query["to"][0]})
        return Response(
            200,
            "<!DOCTYPE html><html><head><title>External</title></head>"
            f"<body><h1>External site</h1><p>You asked for {request.path}</p></body></html>",
        )

    with LocalHTTPServer({"/": app}) as server:
        yield server


def task(url: str, allowed: list[str] | None = None, task_id: str = "t") -> Task:
    metadata: dict = {"start_url": url}
    if allowed is not None:
        metadata["allowed_origins"] = allowed
    return Task(id=task_id, metadata=metadata)


def lab(path: str) -> str:
    return site_url("lab", path)


def bid_of(observation: Observation, name: str, role: str | None = None) -> str:
    """The bid of the first actionable element with this accessible name (and role)."""
    for element in observation.data["elements"]:
        if element["name"] == name and (role is None or element["role"] == role):
            return element["bid"]
    raise AssertionError(f"no element {role or ''} {name!r} in:\n{observation.text}")


def act(kind: str, **arguments: object) -> Action:
    from sandboxes.web import parse_action

    return parse_action(kind, dict(arguments))

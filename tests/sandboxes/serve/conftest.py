"""Helpers for the OpenEnv server tests: the real app on a free port in a uvicorn thread, plain HTTP
calls, and a sandbox factory that remembers what its sandboxes held, for leak checks."""

from __future__ import annotations

import json
import shutil
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from sandboxes.base import Sandbox
from sandboxes.checks import resource_exists
from sandboxes.serve.pool import SessionPool
from sandboxes.serve.server import real_sandbox_factory

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@contextmanager
def serving(app: FastAPI, host: str = "127.0.0.1") -> Iterator[str]:
    """Run `app` with uvicorn on a free port of `host` in a thread; yields its base URL. On exit the
    server shuts down as on SIGTERM (every sandbox closed) and its thread must end."""
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="serve-under-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "the server thread died while starting (see the log above)"
        assert time.monotonic() < deadline, "the server did not start within 30 s"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}"
    finally:
        server.should_exit = True
        thread.join(60)
        assert not thread.is_alive(), "the server did not shut down within 60 s"


def pool_of(app: FastAPI) -> SessionPool:
    return app.state.pool


def call(
    method: str, url: str, body: Any = None, *, token: str | None = None, raw: bytes | None = None
) -> tuple[int, Any]:
    """(status, decoded JSON body) of one HTTP request; errors are answers too."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with _NO_PROXY.open(request, timeout=120) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)


class Recorder:
    """Wraps a sandbox factory and keeps every sandbox it made; `held()` is what they hold now."""

    def __init__(self, factory: Callable[[], Sandbox]) -> None:
        self.factory = factory
        self.made: list[Sandbox] = []
        self.seen: set[str] = set()

    def __call__(self) -> Sandbox:
        sandbox = self.factory()
        self.made.append(sandbox)
        return sandbox

    def held(self) -> set[str]:
        now = {r for sandbox in self.made for r in sandbox.resources()}
        self.seen |= now
        return now

    def leaked(self) -> list[str]:
        """What any sandbox ever held (as seen by `held()`) that still exists."""
        self.held()
        return sorted(r for r in self.seen if resource_exists(r))


@pytest.fixture
def need_tools() -> Callable[..., None]:
    def need(*tools: str) -> None:
        for tool in tools:
            if shutil.which(tool) is None:
                pytest.fail(f"{tool} is not installed (apt-get install {tool})")

    return need


@contextmanager
def recording(factory: Callable[[], Sandbox]) -> Iterator[Recorder]:
    """A Recorder of `factory`'s sandboxes; at the end nothing any of them held may be left."""
    made = Recorder(factory)
    yield made
    assert not made.leaked(), f"sandbox resources survived: {made.leaked()}"


@pytest.fixture
def recorder(need_tools) -> Iterator[Recorder]:
    """Terminal sandboxes in bwrap, as most server tests serve them."""
    need_tools("bwrap", "tmux")
    with recording(real_sandbox_factory("terminal", "bwrap")) as made:
        yield made

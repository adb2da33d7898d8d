"""One MCP client session, driven synchronously from the sandbox.

The SDK is async (anyio) and its transports are context managers that must be entered and left by
one task. So each sandbox owns a private event loop, which it runs from the caller's thread for
the length of one operation (`run_until_complete`): a holder task enters the transport and the
`ClientSession`, initializes, lists the tools and then waits for the stop signal; tool calls run
as further tasks while the session is open. Between operations the loop is idle and the server's
messages wait in the pipe. A loop in a thread of its own was measured first: the hand-off between
threads (the GIL's switch interval) added 3-6 ms to a 10 ms call. Every wait is bounded.

Stdio servers go through the sandbox's own transport (`stdio.py`), which keeps their stderr and
stray stdout as diagnostics and hands the process to the sandbox; http servers through the SDK's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from sandboxes.base import SandboxError
from sandboxes.mcp.server_output import ServerOutput
from sandboxes.mcp.stdio import Spawned, stdio_transport, wait_exit

T = TypeVar("T")
CLIENT_INFO = types.Implementation(name="agentworld-mcp-sandbox", version="1")
# The transports' own shutdowns are bounded (stdio: a second at most, the server stopped before it).
SHUTDOWN_TIMEOUT_S = 10.0
# How much longer than the SDK's own bound (a call's read timeout, the startup timeout) the sandbox
# waits before cancelling the operation itself.
LOOP_GRACE_S = 5.0


@dataclass(frozen=True)
class Launch:
    """What to connect to: a stdio argv (already wrapped in its isolation) or an http URL."""

    transport: str
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    url: str
    startup_timeout_s: float


@dataclass(frozen=True)
class Connected:
    server_name: str
    server_version: str
    protocol_version: str
    tools: list[types.Tool]


class EventLoop:
    """A private asyncio loop, run in the caller's thread for one bounded operation at a time."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, awaitable: Awaitable[T], timeout_s: float) -> T:
        """The awaitable's result; TimeoutError (the awaitable cancelled) after `timeout_s`."""
        if asyncio._get_running_loop() is not None:
            raise SandboxError(
                "the MCP sandbox is synchronous: call it from a thread with no running event loop "
                "(from async code: await asyncio.to_thread(sandbox.step, action))"
            )
        return self.loop.run_until_complete(asyncio.wait_for(awaitable, timeout_s))

    def close(self) -> None:
        if self.loop.is_closed():
            return
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            with contextlib.suppress(BaseException):
                self.run(asyncio.gather(*pending, return_exceptions=True), SHUTDOWN_TIMEOUT_S)
        self.loop.close()


class Connection:
    """A live client session on `loop`; `connect` returns what the server announced. After a failed
    `connect` the caller still calls `close` (having stopped the server, if it wants to say how)."""

    def __init__(self, loop: EventLoop, launch: Launch, output: ServerOutput) -> None:
        self._loop = loop
        self._launch = launch
        self._output = output
        self.spawned = Spawned()
        self._session: ClientSession | None = None
        self._stop: asyncio.Event | None = None
        self._holder: asyncio.Task[None] | None = None
        self.closed_by_peer = False

    def connect(self) -> Connected:
        ready: asyncio.Future[Connected] = self._loop.loop.create_future()
        self._holder = self._loop.loop.create_task(self._hold(ready))
        # The holder fails `ready` itself within startup_timeout_s; the grace covers the shutdown.
        try:
            return self._loop.run(ready, self._launch.startup_timeout_s + LOOP_GRACE_S)
        except TimeoutError:
            raise SandboxError(
                f"the MCP server did not finish its handshake within {self._launch.startup_timeout_s:g} s"
            ) from None

    async def _hold(self, ready: asyncio.Future[Connected]) -> None:
        self._stop = asyncio.Event()
        launch = self._launch
        try:
            async with contextlib.AsyncExitStack() as stack:
                if launch.transport == "stdio":
                    transport = stdio_transport(
                        launch.argv, launch.env, launch.cwd, self._output, self.spawned
                    )
                    read, write = await stack.enter_async_context(transport)
                else:
                    read, write = await stack.enter_async_context(streamable_http_client(launch.url))
                session = await stack.enter_async_context(ClientSession(read, write, client_info=CLIENT_INFO))
                with anyio.fail_after(launch.startup_timeout_s):
                    init = await session.initialize()
                    tools = await _list_all_tools(session)
                self._session = session
                if ready.done():  # the caller gave up waiting (its bound ran out)
                    return
                ready.set_result(
                    Connected(init.server_info.name, init.server_info.version, init.protocol_version, tools)
                )
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller, which re-raises it
            if not ready.done():
                leaf = _leaf(exc)
                if isinstance(leaf, TimeoutError):
                    exc = SandboxError(
                        f"the MCP server did not finish its handshake within {launch.startup_timeout_s:g} s"
                    )
                elif isinstance(leaf, SandboxError):
                    exc = leaf
                else:
                    exc = SandboxError(f"the MCP connection failed: {type(leaf).__name__}: {leaf}")
                ready.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError):
                self.closed_by_peer = True
        finally:
            self._session = None

    def call_tool(self, name: str, arguments: dict[str, Any], timeout_s: float) -> types.CallToolResult:
        """The server's result; raises the SDK's MCPError (protocol errors, REQUEST_TIMEOUT, closed)."""
        session = self._session
        if session is None:
            raise SandboxError("the MCP session is not open")
        return self._loop.run(
            session.call_tool(name, arguments, read_timeout_seconds=timeout_s), timeout_s + LOOP_GRACE_S
        )

    def wait_exit(self, timeout_s: float) -> int | None:
        """A stdio server's returncode once it has exited (None if it still runs after `timeout_s`)."""
        return self._loop.run(wait_exit(self.spawned, timeout_s), timeout_s + LOOP_GRACE_S)

    def close(self) -> None:
        """Leave the session and close the transport (a stdio server still running is killed)."""
        holder, self._holder = self._holder, None
        if holder is None or holder.done():
            return
        if self._stop is not None:
            self._stop.set()
        with contextlib.suppress(BaseException):  # a failed or stuck shutdown still ends the connection
            self._loop.run(holder, SHUTDOWN_TIMEOUT_S)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the task groups' exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _list_all_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools

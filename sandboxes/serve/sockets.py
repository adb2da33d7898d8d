"""openenv-core's WebSocket server (`/ws`) behind the session table's leases, through its public seam.

openenv's `HTTPEnvServer` runs each WebSocket session: it builds the session's environment through the
factory it is given, answers every message but `close` with exactly one message, and closes the
environment in the session's own thread when its handler returns. `LeasedSockets` stands between a
connection and that handler, as an ASGI app, and never reaches inside openenv:

- a handshake over the limit is refused here, with openenv's own CAPACITY_REACHED error;
- one session's environment is built at a time, so the factory knows whose lease it binds (building
  one makes no sandbox: that waits for the first reset);
- a message the handler takes starts a call, the handler's answer ends it; both renew the lease;
- a call that outlasts WATCH_AFTER_S listens to its socket: a client that leaves or says close ends
  the session at once, its sandbox closed from here (which ends the call), the late answer dropped;
- a session the server reclaims (idle past its lease, shutdown) ends its handler at once, so that
  openenv releases the rest; the socket stays open to tell each later call why.
"""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from openenv.core.env_server import (
    ConcurrencyConfig,
    HTTPEnvServer,
    ServerMode,
    SessionCapacityError,
    WSErrorCode,
    WSErrorResponse,
)
from openenv.core.env_server.types import EnvironmentMetadata

from sandboxes.serve.auth import Message, Receive, Scope, Send
from sandboxes.serve.connection import CURRENT_CONNECTION, Connection, asks_to_close
from sandboxes.serve.models import SandboxAction, SandboxObservation
from sandboxes.serve.pool import CLOSED, DISCONNECTED, RECLAIMED, Lease, ServedEnvironment, SessionPool

# A call that outlasts this starts listening to its WebSocket (for its client leaving); quicker ones
# never pay for a listener. A client that leaves is thus seen within this much of a call's start.
WATCH_AFTER_S = 0.2
# openenv's table holds the WebSocket sessions only, and keeps one whose lease has ended until its
# handler returns (an interrupted call still returning): the limit is the leases', so openenv's own
# cap is set out of the way.
OPENENV_TABLE_CAP = 1_000_000
_ENDED: Message = {"type": "websocket.disconnect", "code": 1000}  # what ends an openenv handler


def register_routes(app: FastAPI, pool: SessionPool) -> None:
    """Serve openenv's `/ws` (through the leases) and `/health`, the environment's `/metadata`, run
    the pool's reaper while the app runs and close every sandbox at shutdown. openenv's routes live
    on an app of their own and only these two are exposed: its stateless /reset, /step and /state
    (production mode leaves them out anyway) and /mcp would build environments outside the limit,
    and its /metadata builds one per request through the factory that binds WebSocket sessions."""
    sockets = LeasedSockets(pool)
    app.router.add_route("/health", sockets.openenv_app, methods=["GET"], include_in_schema=False)
    app.router.add_websocket_route("/ws", sockets)
    probe = pool.env_factory()
    described = probe.get_metadata()
    probe.close()

    @app.get("/metadata", response_model=EnvironmentMetadata, tags=["Environment Info"])
    async def metadata() -> EnvironmentMetadata:
        return described

    app.router.on_startup.append(pool.start)
    app.router.on_shutdown.append(pool.close_all)


class LeasedSockets:
    """The `/ws` ASGI app: openenv's handler, each connection under a lease (module docstring). It
    runs inside `ConnectionTracker`, which gives each connection its `Connection`."""

    def __init__(self, pool: SessionPool) -> None:
        self.pool = pool
        self.opening: Lease | None = None  # the lease whose environment openenv builds now
        self.creating = asyncio.Lock()
        server = HTTPEnvServer(
            self.environment,
            SandboxAction,
            SandboxObservation,
            concurrency_config=ConcurrencyConfig(max_concurrent_envs=OPENENV_TABLE_CAP),
        )
        self.openenv_app = FastAPI()
        server.register_routes(self.openenv_app, mode=ServerMode.PRODUCTION)

    def environment(self) -> ServedEnvironment:
        """openenv's factory: the environment of the session being opened, bound to its lease (a
        plain one when none is, as when openenv checks the factory once at start)."""
        env = self.pool.env_factory()
        lease, self.opening = self.opening, None
        if lease is not None:
            lease.env = env
        return env

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = CURRENT_CONNECTION.get()
        if connection is None:
            raise RuntimeError("LeasedSockets serves behind ConnectionTracker (see server.build_app)")
        try:
            lease = self.pool.reserve(connection)
        except SessionCapacityError as exc:
            await _refuse(receive, send, exc)
            return
        socket = _LeasedSocket(self, lease, connection, receive, send)
        await self.creating.acquire()
        self.opening = lease
        try:
            await self.openenv_app(scope, socket.receive, socket.send)
        finally:
            socket.finish()
        if lease.ended in RECLAIMED and not connection.gone:
            await socket.tell_until_gone()


class _LeasedSocket:
    """One connection's lease kept in step with what passes between it and openenv's handler."""

    def __init__(
        self, sockets: LeasedSockets, lease: Lease, connection: Connection, receive: Receive, send: Send
    ) -> None:
        self.sockets, self.pool, self.lease, self.connection = sockets, sockets.pool, lease, connection
        self.raw_receive, self.raw_send = receive, send
        self.creating = True  # holds sockets.creating until openenv has built the environment
        self.timer: asyncio.TimerHandle | None = None
        self.answered = False  # the client was told its call ended: the handler's late answer is dropped
        self.inbound: asyncio.Future[Message] | None = None  # a receive the handler stopped waiting for

    def built(self) -> None:
        if self.creating:
            self.creating = False
            if self.sockets.opening is self.lease:  # openenv never called the factory
                self.sockets.opening = None
            self.sockets.creating.release()

    async def receive(self) -> Message:
        if self.creating and self.lease.env is not None:
            self.built()
        if self.lease.ended in RECLAIMED:
            return _ENDED
        message = await self.next_message()
        if message is None:  # reclaimed while the handler waited
            return _ENDED
        kind = message.get("type")
        if self.lease.ended is not None:
            return message
        if kind == "websocket.disconnect" or self.connection.close_requested:
            # The handler ends the session on this: counted now (shutdown may begin while openenv
            # closes the sandbox), and the slot freed, as the handler's own cleanup is under way.
            self.pool.end(self.lease, self.pool.ended_by_client(self.lease))
            self.pool.drop(self.lease)
        elif kind == "websocket.receive":  # openenv answers every message but close with one
            self.pool.call_started(self.lease)
            self.timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, self.watch)
        return message

    async def next_message(self) -> Message | None:
        """The socket's next message, or None once the server reclaims the session (the pending
        receive is kept for `tell_until_gone`)."""
        inbound, self.inbound = self.inbound, None
        inbound = inbound or asyncio.ensure_future(self.raw_receive())
        reclaimed = self.lease.reclaimed
        if reclaimed is not None:
            await asyncio.wait((inbound, reclaimed), return_when=asyncio.FIRST_COMPLETED)
        if reclaimed is None or inbound.done():
            return await inbound
        self.inbound = inbound
        return None

    async def send(self, message: Message) -> None:
        kind = message.get("type")
        if kind == "websocket.send" and self.lease.busy:
            self.call_ended()
            if self.answered:
                self.answered = False
                return
        elif kind == "websocket.close" and self.lease.ended in RECLAIMED:
            return  # the socket stays open: tell_until_gone answers the client's next call
        await self.raw_send(message)

    def call_ended(self) -> None:
        self.pool.call_ended(self.lease)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def watch(self) -> None:
        """A long call: read the socket's next message now (the handler gets it next either way)."""
        self.timer = None
        connection = self.connection
        if connection.next is None:
            connection.next = asyncio.ensure_future(connection.receive())
        connection.next.add_done_callback(self.heard)

    def heard(self, heard: asyncio.Future[Message]) -> None:
        """The socket's next message arrived while the call runs: a message sent ahead waits for the
        handler; a disconnect or openenv's close ends the session now, its slot freed at once."""
        lease, connection = self.lease, self.connection
        if not lease.busy or lease.ended or heard.cancelled() or heard.exception() is not None:
            return
        message = heard.result()
        leaving = message.get("type") == "websocket.disconnect"
        if not leaving and not asks_to_close(message):
            return
        connection.close_requested = connection.close_requested or not leaving
        connection.gone = connection.gone or leaving  # nothing more can reach this client
        self.pool.end(lease, DISCONNECTED if leaving else CLOSED)
        self.pool.drop(lease)
        if not leaving:  # answered now; the call's own answer, once its sandbox is closed, is dropped
            self.answered = True
            self.pool.later(self.raw_send(_error("the client closed the session during the call")))
        self.pool.later(self.pool.release(lease))

    def finish(self) -> None:
        """openenv's handler returned, having closed the session's environment."""
        self.built()
        if self.lease.busy:  # the handler was cancelled mid-call
            self.call_ended()
        if self.lease.ended is None:
            self.pool.end(self.lease, self.pool.ended_by_client(self.lease))
        self.pool.drop(self.lease)

    async def tell_until_gone(self) -> None:
        """A reclaimed session's socket: each later call is told why it ended, until the client
        closes or leaves."""
        while True:
            inbound, self.inbound = self.inbound, None
            message = await (inbound or self.raw_receive())
            kind = message.get("type")
            if kind == "websocket.disconnect":
                return
            if kind == "websocket.receive":
                if self.connection.close_requested:
                    await self.raw_send({"type": "websocket.close", "code": 1000})
                    return
                await self.raw_send(_error(self.lease.message))


def _error(message: str, code: WSErrorCode = WSErrorCode.SESSION_ERROR, **extra: int) -> Message:
    text = WSErrorResponse(data={"message": message, "code": code, **extra}).model_dump_json()
    return {"type": "websocket.send", "text": text}


async def _refuse(receive: Receive, send: Send, exc: SessionCapacityError) -> None:
    """Refuse a session as openenv does: accept, send CAPACITY_REACHED, close (ConnectionTracker
    waits for the client's first message first, so that the refusal is what it reads)."""
    await receive()  # the handshake
    await send({"type": "websocket.accept"})
    counts = {"active_sessions": exc.active_sessions, "max_sessions": exc.max_sessions}
    await send(_error(str(exc), WSErrorCode.CAPACITY_REACHED, **counts))
    await send({"type": "websocket.close", "code": 1000})

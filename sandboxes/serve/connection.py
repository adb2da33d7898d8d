"""Which WebSocket a session belongs to, and what passes over it (see ConnectionTracker)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from contextvars import ContextVar

from fastapi import WebSocketDisconnect

from sandboxes.serve.auth import DEFAULT_MAX_ACTION_BYTES, ASGIApp, Message, Receive, Scope, Send

REFUSAL_LINGER_S = 5.0  # how long a refused WebSocket stays open for its client's first message


@dataclasses.dataclass
class Connection:
    receive: Receive  # the socket's own ASGI receive, for LeasedSockets to watch while a call runs
    close_requested: bool = False
    refused: bool = False  # CAPACITY_REACHED was sent and the socket is about to close
    gone: bool = False  # the client disconnected: what the handler still sends is dropped
    # A receive() LeasedSockets started while a call ran (to see the client leave); the handler's next
    # message is its result.
    next: asyncio.Future[Message] | None = None


CURRENT_CONNECTION: ContextVar[Connection | None] = ContextVar("agentworld_serve_connection", default=None)


def asks_to_close(message: Message) -> bool:
    """openenv's `{"type": "close"}` message."""
    text = message.get("text") if message.get("type") == "websocket.receive" else None
    if not text or '"close"' not in text:
        return False
    try:
        return json.loads(text).get("type") == "close"
    except (ValueError, AttributeError):
        return False


class ConnectionTracker:
    """ASGI middleware for WebSockets. It notes openenv's `{"type": "close"}` message, so the pool can
    tell a session its client closed from one whose connection dropped (`sockets.LeasedSockets` runs
    inside this call, so it finds the connection through a context variable); refuses a message
    over `max_message_bytes` with an error that names the limit, keeping the session (uvicorn's
    `ws_max_size` closes the connection only past a far larger cap); spells out openenv's
    VALIDATION_ERROR, whose message ("Invalid message") is all its client shows; and once the client
    is gone, drops what the handler still sends, which would otherwise raise and be logged as an
    application error for an ordinary disconnect."""

    def __init__(self, app: ASGIApp, max_message_bytes: int = DEFAULT_MAX_ACTION_BYTES) -> None:
        self.app = app
        self.max_message_bytes = max_message_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        connection = Connection(receive)
        limit = self.max_message_bytes

        async def tracked() -> Message:
            while True:
                pending, connection.next = connection.next, None
                message = await pending if pending is not None else await receive()
                kind = message.get("type")
                if kind == "websocket.disconnect":
                    connection.gone = True
                    return message
                if kind == "websocket.receive":
                    size = _size(message, limit)
                    if size > limit:
                        await explained({"type": "websocket.send", "text": _too_large(size, limit)})
                        continue
                    if not connection.close_requested and asks_to_close(message):
                        connection.close_requested = True
                return message

        async def explained(message: Message) -> None:
            if connection.gone:
                return
            text = message.get("text") if message.get("type") == "websocket.send" else None
            if text and text.startswith(_ERROR_PREFIX):
                if "VALIDATION_ERROR" in text:
                    message = {**message, "text": _explain_validation(text)}
                connection.refused = connection.refused or "CAPACITY_REACHED" in text
            elif message.get("type") == "websocket.close" and connection.refused:
                # openenv refuses a session right after the handshake and closes at once; openenv's
                # client sends before it reads, so it would see the close, not the refusal. Wait for
                # its first message (bounded), so that the refusal is what it reads.
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(REFUSAL_LINGER_S):
                        await receive()
            try:
                await send(message)
            except OSError:  # uvicorn's ClientDisconnected: the client left between two messages
                connection.gone = True

        token = CURRENT_CONNECTION.set(connection)
        try:
            await self.app(scope, tracked, explained)
        except WebSocketDisconnect:
            # openenv's /ws handler closes the socket after its client has already gone, which raises
            # this once the session is cleaned up: a normal end, not an application error to log.
            pass
        finally:
            CURRENT_CONNECTION.reset(token)
            if connection.next is not None and not connection.next.done():
                connection.next.cancel()


def _size(message: Message, limit: int) -> int:
    """The message's size in bytes, exact wherever it could be over `limit` (UTF-8 takes at most 4
    bytes a character: shorter texts are not encoded just to be measured)."""
    data = message.get("text") or message.get("bytes") or b""
    if isinstance(data, str) and len(data) * 4 > limit:
        return len(data.encode())
    return len(data)


def _too_large(size: int, limit: int) -> str:
    message = (
        f"the message is {size} bytes, over this server's limit of {limit} bytes "
        "(--max-action-bytes); it was not run and the session goes on: send a smaller action"
    )
    return json.dumps({"type": "error", "data": {"message": message, "code": "MESSAGE_TOO_LARGE"}})


_ERROR_PREFIX = '{"type":"error"'  # how openenv's WSErrorResponse.model_dump_json() begins


def _explain_validation(text: str) -> str:
    try:
        response = json.loads(text)
        data = response["data"]
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error.get('loc', ())) or 'message'}: {error.get('msg', '')}"
            for error in data.get("errors", [])
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return text
    if problems:
        data["message"] = (
            f"Invalid message: {problems}. A step's data is an action {{kind, arguments}} (GET /schema)"
        )
    return json.dumps(response)

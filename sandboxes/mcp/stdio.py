"""The stdio transport the sandbox uses in place of the SDK's `stdio_client`.

The protocol is the same (newline-delimited JSON-RPC on the server's stdin and stdout), but what the
SDK's transport drops or logs is kept: a stdout line that is not a JSON-RPC message goes to the
server's diagnostics (the SDK logs a traceback for each and hands the session an error), stderr
goes there too, and the process stays with the sandbox, which stops it itself (recording whether
SIGTERM was enough) and reads how it exited.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.abc import AsyncResource, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from sandboxes.mcp.server_exit import kill_group
from sandboxes.mcp.server_output import ServerOutput

# After stdin and stdout close, how long a process the sandbox did not stop gets before SIGKILL.
EXIT_WAIT_S = 0.5
POLL_S = 0.01
CLOSE_TURNS = 3


Incoming = MemoryObjectSendStream[SessionMessage | Exception]
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


@dataclass
class Spawned:
    """The server process, once the transport has started it."""

    process: Process | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def returncode(self) -> int | None:
        return self.process.returncode if self.process else None


@contextlib.asynccontextmanager
async def stdio_transport(
    argv: list[str], env: dict[str, str], cwd: str | None, output: ServerOutput, spawned: Spawned
) -> AsyncIterator[Streams]:
    """(read stream, write stream) for a ClientSession, to a server started from `argv`."""
    stderr_read, stderr_write = os.pipe()
    try:
        process = await anyio.open_process(
            argv, env=get_default_environment() | env, cwd=cwd, stderr=stderr_write, start_new_session=True
        )
    except BaseException:
        os.close(stderr_read)
        raise
    finally:
        os.close(stderr_write)
    output.read_pipe(stderr_read)
    spawned.process = process
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_stdout() -> None:
        assert process.stdout is not None
        pending = bytearray()
        session_open = True
        async with read_writer:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for chunk in process.stdout:
                    scan_from = len(pending)
                    pending += chunk
                    while (end := pending.find(b"\n", scan_from)) >= 0:
                        line = bytes(pending[:end]).strip()
                        del pending[: end + 1]
                        scan_from = 0
                        if line and session_open:
                            session_open = await _deliver(line, read_writer, output)
            if pending.strip():
                output.add_stdout_line(bytes(pending).strip())

    async def pump_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(text.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session sees the connection end, not a hanging request

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pump_stdout)
        tasks.start_soon(pump_stdin)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _shut_down(process, read_stream, write_stream)
            tasks.cancel_scope.cancel()


async def _deliver(line: bytes, read_writer: Incoming, output: ServerOutput) -> bool:
    """Send one protocol message to the session, or keep a stray line; False once the session is gone."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        output.add_stdout_line(line)
        return True
    try:
        await read_writer.send(SessionMessage(message))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return False  # keep reading (and discarding), so the server never blocks on a full pipe
    return True


async def _shut_down(process: Process, *streams: AsyncResource) -> None:
    """Close the pipes; a server the sandbox did not stop first (a failed start) is killed."""
    for stream in streams:
        await stream.aclose()
    assert process.stdin is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, EXIT_WAIT_S):
        kill_group(process.pid)
        await _exited(process, EXIT_WAIT_S)
    assert process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    # asyncio closes the process's transport only once it has seen the exit and both pipes' ends,
    # which a loop closed right after may never run (its __del__ then fails on the closed loop).
    # Nothing public closes it, hence the attribute walk (the SDK's transport does the same).
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    if transport is not None:
        transport.close()
    for _ in range(CLOSE_TURNS):  # the pipes' own close callbacks
        await anyio.lowlevel.checkpoint()


async def _exited(process: Process, timeout_s: float) -> bool:
    # Polls returncode: process.wait() also waits for the pipes' end, which a child may hold open.
    with anyio.move_on_after(timeout_s):
        while process.returncode is None:
            await anyio.sleep(POLL_S)
    return process.returncode is not None


async def wait_exit(spawned: Spawned, timeout_s: float) -> int | None:
    """The server's returncode once the event loop has seen it exit (None after `timeout_s`)."""
    if spawned.process is None:
        return None
    await _exited(spawned.process, timeout_s)
    return spawned.returncode

"""The MCP sandbox: one catalogue server per episode, driven through the official `mcp` client.

A reset starts the task's server fresh in its own jail (a stateless server that is still running
is kept), records its identity and tool definitions, and answers with the tool list. A step sends
one tools/call; every answer (result, protocol error, timeout) is an observation, and only a
server that died makes the step raise SandboxCrashedError.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pydantic
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from sandboxes.base import (
    InvalidActionError,
    Sandbox,
    SandboxClosedError,
    SandboxCrashedError,
    SandboxError,
    StepResult,
)
from sandboxes.checks import process_exists
from sandboxes.http_server import LocalHTTPServer
from sandboxes.mcp import install
from sandboxes.mcp.actions import (
    error_observation,
    initial_observation,
    parse_action,
    result_observation,
    timeout_observation,
    tool_definition,
)
from sandboxes.mcp.catalogue import ServerEntry, embedded_catalogue, entry_to_dict
from sandboxes.mcp.client import Connected, Connection, EventLoop, Launch
from sandboxes.mcp.isolation import ServerJail
from sandboxes.mcp.seeds import seed_workdir, start_site
from sandboxes.terminal.config import BwrapBackend, LocalBackend
from schemas.records import Action, Environment, Observation, Task

log = logging.getLogger(__name__)
STDERR_TAIL_BYTES = 2000
HTTP_POLL_S = 0.05


@dataclass(frozen=True)
class McpConfig:
    catalogue: dict[str, ServerEntry] = field(default_factory=embedded_catalogue)
    # bwrap isolates stdio servers (the terminal's limits: memory, pids, cpu); local runs them on the host.
    backend: BwrapBackend | LocalBackend = field(default_factory=BwrapBackend)
    # Install a packaged server missing from the cache on first use (else fail, saying what to run).
    install_missing: bool = True


class McpSandbox(Sandbox):
    domain = "mcp"

    def __init__(self, config: McpConfig | None = None) -> None:
        self.config = config or McpConfig()
        self._loop: EventLoop | None = None
        self._closed = False
        self._entry: ServerEntry | None = None
        self._jail: ServerJail | None = None
        self._connection: Connection | None = None
        self._connected: Connected | None = None
        self._errlog: IO[str] | None = None
        self._site: LocalHTTPServer | None = None
        self._http_process: subprocess.Popen[bytes] | None = None

    @property
    def backend_name(self) -> str:
        return self.config.backend.kind

    def start(self) -> None:
        if self._closed:
            raise SandboxClosedError("this MCP sandbox was closed; create a new one")
        if self._loop is None:
            self._loop = EventLoop()

    def reset(self, task: Task) -> Observation:
        if self._closed or self._loop is None:
            raise SandboxClosedError("the MCP sandbox is not started (or was closed)")
        entry = self._task_entry(task)
        keep = entry == self._entry and entry.state == "none" and self._server_alive()
        if not keep:
            self._stop_server()
            self._start_server(entry)
        assert self._connected is not None
        connected = self._connected
        tools = [tool.name for tool in connected.tools]
        site = self._site.url("/") if self._site else ""
        return initial_observation(entry.name, connected.server_name, connected.server_version, tools, site)

    def _task_entry(self, task: Task) -> ServerEntry:
        name = task.metadata.get("server")
        if name is None and len(self.config.catalogue) == 1:
            name = next(iter(self.config.catalogue))
        if name not in self.config.catalogue:
            known = ", ".join(sorted(self.config.catalogue))
            raise SandboxError(
                f"task {task.id!r}: metadata.server {name!r} is not in the catalogue ({known})"
            )
        return self.config.catalogue[name]

    def _start_server(self, entry: ServerEntry) -> None:
        if entry.package:
            if self.config.install_missing:
                install.ensure_installed(entry)
            elif not install.is_installed(entry.package):
                raise SandboxError(
                    f"MCP server {entry.name!r} ({entry.package}) is not installed; "
                    f"run: python -m sandboxes.mcp install {entry.name}"
                )
        tmpdir = Path(tempfile.mkdtemp(prefix="agentworld-mcp-"))
        os.chmod(tmpdir, 0o755)  # the sandbox's unprivileged user must reach its bound directories
        self._entry = entry
        try:
            self._jail = jail = ServerJail(self.config.backend, tmpdir)
            seed_workdir(entry.seed, jail.workdir)
            jail.hand_over()
            if entry.site:
                self._site = start_site()
            self._errlog = open(tmpdir / "server.log", "w")  # noqa: SIM115 - closed in _stop_server
            launch = self._launch(entry, jail)
            assert self._loop is not None
            self._connection = Connection(self._loop, launch, self._errlog)
            try:
                self._connected = self._connection.connect()
            except SandboxError as exc:
                raise SandboxError(
                    f"MCP server {entry.name!r} did not start: {exc}{self._stderr_tail()}"
                ) from None
        except BaseException:
            self._stop_server()
            raise

    def _launch(self, entry: ServerEntry, jail: ServerJail) -> Launch:
        values = jail.placeholders()
        values["site"] = self._site.url("") if self._site else ""
        if entry.transport == "http":
            values["port"] = str(_free_port())

        def fill(text: str) -> str:
            for key, value in values.items():
                text = text.replace("{" + key + "}", value)
            return text

        url = fill(entry.url)
        if not entry.command:  # an http server someone else runs
            return Launch("http", [], {}, None, url, entry.startup_timeout_s)
        program = [install.resolve_program(entry, fill(entry.command[0])), *map(fill, entry.command[1:])]
        binds = [install.package_dir(entry.package)] if entry.package else []
        # Python servers (packaged or not) link to the base interpreter, which may be under /root.
        binds.append(install.python_home())
        # An http server must be reachable from the host, so it keeps the host's network.
        network = entry.network or entry.transport == "http"
        env = {key: fill(value) for key, value in entry.env.items()}
        argv, env, cwd = jail.server_argv(program, env, fill(entry.cwd), network, binds)
        if entry.transport == "stdio":
            return Launch("stdio", argv, env, cwd, "", entry.startup_timeout_s)
        assert self._errlog is not None
        self._http_process = subprocess.Popen(
            argv, env=env or None, cwd=cwd, stdin=subprocess.DEVNULL, stdout=self._errlog,
            stderr=self._errlog, start_new_session=True,
        )  # fmt: skip
        _wait_for_port(url, entry.startup_timeout_s, self._http_process)
        return Launch("http", [], {}, None, url, entry.startup_timeout_s)

    def step(self, action: Action) -> StepResult:
        if self._closed or self._loop is None:
            raise SandboxClosedError("the MCP sandbox is not started (or was closed)")
        checked = parse_action(action.kind, action.arguments)
        if self._connection is None or self._entry is None:
            raise InvalidActionError("no MCP server is running: reset the sandbox with a task first")
        self._raise_if_crashed()
        entry = self._entry
        name, arguments = checked.arguments["name"], checked.arguments["arguments"]
        try:
            result = self._connection.call_tool(name, arguments, entry.call_timeout_s)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return StepResult(timeout_observation(entry.name, name, entry.call_timeout_s))
            if exc.code == CONNECTION_CLOSED:
                self._raise_if_crashed(wait_s=2.0)
                raise SandboxCrashedError(f"MCP server {entry.name!r} closed the connection") from None
            return StepResult(error_observation(entry.name, name, exc.code, exc.message))
        except TimeoutError:
            return StepResult(timeout_observation(entry.name, name, entry.call_timeout_s))
        except (RuntimeError, pydantic.ValidationError) as exc:
            # The client rejected the result (e.g. structured content that breaks the output schema).
            self._raise_if_crashed()
            return StepResult(error_observation(entry.name, name, "invalid_result", str(exc)))
        return StepResult(result_observation(entry.name, name, result))

    def _server_pid(self) -> int | None:
        if self._http_process is not None:
            return self._http_process.pid
        return self._jail.server_pid() if self._jail else None

    def _server_alive(self) -> bool:
        if self._connection is None or self._connection.closed_by_peer:
            return False
        pid = self._server_pid()
        if self._http_process is not None:
            return self._http_process.poll() is None
        return pid is None or process_exists(pid)

    def _raise_if_crashed(self, wait_s: float = 0.0) -> None:
        # A killed server's pipe closes a moment before its process is reaped: look again briefly.
        deadline = time.monotonic() + wait_s
        while self._server_alive():
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)
        entry = self._entry
        raise SandboxCrashedError(f"MCP server {entry.name if entry else '?'!r} exited{self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        if self._jail is None:
            return ""
        try:
            with open(self._jail.tmpdir / "server.log", "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - STDERR_TAIL_BYTES))
                tail = f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f"; its last output: {tail}" if tail else ""

    def _stop_server(self) -> None:
        # The server and its state are discarded, so it gets SIGTERM at once: waiting for it to exit
        # on its own after stdin closes (the SDK's first step) cost Python servers about 1.4 s.
        pid = self._server_pid() if self._http_process is None else None
        if pid is not None and process_exists(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if self._connection is not None:
            self._connection.close()
        if self._http_process is not None:
            _kill_group(self._http_process)
        if self._site is not None:
            self._site.close()
        if self._errlog is not None:
            self._errlog.close()
        if self._jail is not None:
            self._jail.destroy()
        self._connection = self._connected = self._site = self._errlog = self._jail = None
        self._http_process = None
        self._entry = None

    def close(self) -> None:
        self._stop_server()
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        self._closed = True

    @property
    def alive(self) -> bool:
        if self._closed or self._loop is None:
            return False
        return self._connection is None or self._server_alive()

    def describe(self) -> Environment:
        config: dict[str, Any] = {"server": self._entry.name if self._entry else None}
        if self._entry is None or self._connected is None:
            return Environment(name="mcp", backend=self.backend_name, config=config)
        info = self._connected
        config["entry"] = entry_to_dict(self._entry)
        config["server_info"] = {
            "name": info.server_name,
            "version": info.server_version,
            "protocol_version": info.protocol_version,
        }
        config["backend_config"] = dataclasses.asdict(self.config.backend)
        if self._site is not None:
            config["site"] = self._site.url("/")
        return Environment(
            name="mcp",
            backend=self.backend_name,
            image=f"{info.server_name} {info.server_version}",
            config=config,
            tools=[tool_definition(tool) for tool in info.tools],
        )

    def resources(self) -> list[str]:
        found = self._jail.resources() if self._jail else []
        pid = self._server_pid()
        if pid is not None:
            found.append(f"pid:{pid}")
        return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_port(url: str, timeout_s: float, process: subprocess.Popen[bytes]) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SandboxError(f"the MCP http server exited ({process.returncode}) before listening on {url}")
        try:
            with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=1.0):
                return
        except OSError:
            time.sleep(HTTP_POLL_S)
    raise SandboxError(f"the MCP http server did not listen on {url} within {timeout_s:.0f} s")


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(2.0)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(2.0)
    except ProcessLookupError:
        process.wait(2.0)

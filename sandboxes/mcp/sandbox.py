"""The MCP sandbox: one catalogue server per episode, driven through the official `mcp` client.

A reset starts the task's server fresh in its own jail (a stateless server that is still running
is kept), records its identity and tool definitions, and answers with the tool list. A step sends
one tools/call; every answer (result, protocol error, timeout) is an observation, and only a
server that died makes the step raise SandboxCrashedError, which carries the failed call as a step
(its observation says how the server exited and quotes its last stderr). What a server writes
outside the protocol goes to each step's `info["server_output"]`, bounded; how a replaced server
was stopped (and whether SIGTERM was enough) to the next trajectory's environment.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    VerifierError,
)
from sandboxes.checks import process_exists
from sandboxes.containment import sandbox_tmpdir
from sandboxes.http_server import LocalHTTPServer
from sandboxes.mcp import install
from sandboxes.mcp.actions import (
    error_observation,
    initial_observation,
    parse_action,
    result_observation,
    server_exit_observation,
    timeout_observation,
    tool_definition,
)
from sandboxes.mcp.binds import command_binds, jail_hint, outermost
from sandboxes.mcp.catalogue import ServerEntry, embedded_catalogue, entry_to_dict
from sandboxes.mcp.client import Connected, Connection, EventLoop, Launch
from sandboxes.mcp.http_process import free_port, start_http_server, wait_for_port
from sandboxes.mcp.isolation import ServerJail
from sandboxes.mcp.seeds import seed_workdir, start_site
from sandboxes.mcp.server_exit import KILL_WAIT_S, STOP_GRACE_S, exit_status, stop_server
from sandboxes.mcp.server_output import ServerOutput
from sandboxes.mcp.verify import VERIFIER_KINDS, graph_of, verify_mcp
from sandboxes.terminal.config import BwrapBackend, LocalBackend
from schemas.records import Action, Environment, Observation, Step, Task, Verification

log = logging.getLogger(__name__)
# How long a failed call waits for the dying server's exit status and last stderr.
EXIT_WAIT_S = 2.0


@dataclass(frozen=True)
class McpConfig:
    catalogue: dict[str, ServerEntry] = field(default_factory=embedded_catalogue)
    # bwrap isolates stdio servers (the terminal's limits: memory, pids, cpu); local runs them on the host.
    backend: BwrapBackend | LocalBackend = field(default_factory=BwrapBackend)
    # Install a packaged server missing from the cache on first use (else fail, saying what to run).
    install_missing: bool = True
    # How long a server may take to exit after SIGTERM before it gets SIGKILL (which is recorded).
    stop_grace_s: float = STOP_GRACE_S


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
        self._output: ServerOutput | None = None
        self._site: LocalHTTPServer | None = None
        self._http_process: subprocess.Popen[bytes] | None = None
        self._command: tuple[list[str], dict[str, str], list[Path]] | None = None
        # How the server the latest reset replaced was stopped (recorded with the new episode).
        self._replaced: dict[str, Any] | None = None
        # How the last server this sandbox stopped ended (a reset's or close()'s).
        self.last_stop: dict[str, Any] | None = None

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
            self._replaced = self._stop_server()
            self._start_server(entry)
        else:
            self._replaced = None
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
        tmpdir = Path(sandbox_tmpdir("mcp"))
        os.chmod(tmpdir, 0o755)  # the sandbox's unprivileged user must reach its bound directories
        self._entry = entry
        try:
            self._jail = jail = ServerJail(self.config.backend, tmpdir)
            seed_workdir(entry.seed, jail.workdir)
            jail.hand_over()
            if entry.site:
                self._site = start_site()
            self._output = ServerOutput()
            try:
                launch = self._launch(entry, jail)
                assert self._loop is not None
                self._connection = Connection(self._loop, launch, self._output)
                self._connected = self._connection.connect()
            except SandboxError as exc:
                raise SandboxError(self._start_failure(entry, exc)) from None
        except BaseException:
            self._stop_server()
            raise

    def _start_failure(self, entry: ServerEntry, exc: SandboxError) -> str:
        """Why the server did not start: the error, how it exited, its last stderr, and under bwrap
        what the jail showed it (a custom server's files may be out of its view)."""
        message = f"MCP server {entry.name!r} did not start: {exc}"
        returncode = self._exit_code(0.5)
        if returncode is not None:
            message += f" ({exit_status(returncode, self._jailed)['text']})"
        tail = self._output.tail(wait_s=0.5) if self._output else ""
        if tail:
            message += f"; its last output: {tail}"
        if self._jailed and self._command is not None and not entry.package:
            hint = jail_hint(*self._command, error=message)
            message += f"\n{hint}" if hint else ""
        return message

    def _launch(self, entry: ServerEntry, jail: ServerJail) -> Launch:
        values = jail.placeholders()
        values["site"] = self._site.url("") if self._site else ""
        if entry.transport == "http":
            values["port"] = str(free_port())

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
        if jail.isolated:
            binds = outermost([*binds, *command_binds(entry.name, program, entry.ro_paths)])
        # An http server must be reachable from the host, so it keeps the host's network.
        network = entry.network or entry.transport == "http"
        env = {key: fill(value) for key, value in entry.env.items()}
        self._command = (program, env, binds)
        argv, env, cwd = jail.server_argv(program, env, fill(entry.cwd), network, binds)
        if entry.transport == "stdio":
            return Launch("stdio", argv, env, cwd, "", entry.startup_timeout_s)
        assert self._output is not None
        self._http_process = start_http_server(argv, env, cwd, self._output)
        wait_for_port(url, entry.startup_timeout_s, self._http_process)
        return Launch("http", [], {}, None, url, entry.startup_timeout_s)

    def step(self, action: Action) -> StepResult:
        if self._closed or self._loop is None:
            raise SandboxClosedError("the MCP sandbox is not started (or was closed)")
        checked = parse_action(action.kind, action.arguments)
        if self._connection is None or self._entry is None:
            raise InvalidActionError("no MCP server is running: reset the sandbox with a task first")
        entry = self._entry
        name, arguments = checked.arguments["name"], checked.arguments["arguments"]
        if not self._server_alive():
            raise self._failed_call(name, "had exited before the call")
        try:
            result = self._connection.call_tool(name, arguments, entry.call_timeout_s)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return self._result(timeout_observation(entry.name, name, entry.call_timeout_s))
            if exc.code == CONNECTION_CLOSED:
                raise self._failed_call(name, "exited during the call") from None
            return self._result(error_observation(entry.name, name, exc.code, exc.message))
        except TimeoutError:
            return self._result(timeout_observation(entry.name, name, entry.call_timeout_s))
        except (RuntimeError, pydantic.ValidationError) as exc:
            # The client rejected the result (e.g. structured content that breaks the output schema).
            if not self._server_alive():
                raise self._failed_call(name, "exited during the call") from None
            return self._result(error_observation(entry.name, name, "invalid_result", str(exc)))
        return self._result(result_observation(entry.name, name, result))

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        """`files`, `git_repo` (the server's workdir, read on the host side) and `memory_graph` (the
        graph, asked of the server's own read_graph, unrecorded); see sandboxes.mcp.verify."""
        if task.verifier.get("kind") not in VERIFIER_KINDS:
            return super().verify(task, steps)
        if self._jail is None or self._entry is None:
            raise VerifierError("no MCP server ran an episode here: nothing to verify")
        return verify_mcp(task.verifier, self._jail.workdir, self._read_graph)

    def _read_graph(self) -> dict[str, Any]:
        if self._connection is None or self._entry is None or not self._server_alive():
            raise VerifierError("memory_graph: the server is no longer running")
        return graph_of(self._connection.call_tool("read_graph", {}, self._entry.call_timeout_s))

    def _result(self, observation: Observation) -> StepResult:
        """The step's result, with what the server wrote outside the protocol since the last step."""
        output = self._output.take_step() if self._output else {}
        return StepResult(observation, info={"server_output": output} if output else {})

    def _failed_call(self, tool: str, what: str) -> SandboxCrashedError:
        """The crash of a call to `tool`, carrying the call as a step: how the server exited (waited
        for briefly: a killed server's pipe closes a moment before it is reaped) and its last stderr."""
        entry = self._entry
        assert entry is not None
        returncode = self._exit_code(EXIT_WAIT_S)
        status = exit_status(returncode, self._jailed)
        if returncode is None:
            what = "closed its connection during the call (its process still runs)"
            message = f"the MCP server {what}"
        else:
            message = f"the MCP server {what}: {status['text']}"
        tail = self._output.tail(wait_s=EXIT_WAIT_S / 2) if self._output else ""
        result = self._result(server_exit_observation(entry.name, tool, message, status, tail))
        result.info["server_exit"] = status
        last = f"; its last output: {tail}" if tail else ""
        return SandboxCrashedError(f"MCP server {entry.name!r} {what} to {tool!r}{last}", result=result)

    @property
    def _jailed(self) -> bool:
        return self._jail is not None and self._jail.isolated

    def _server_pid(self) -> int | None:
        if self._http_process is not None:
            return self._http_process.pid
        return self._connection.spawned.pid if self._connection else None

    def _exit_code(self, wait_s: float) -> int | None:
        """The server's returncode, waiting up to `wait_s` for it to exit; None while it runs."""
        if self._http_process is not None:
            try:
                return self._http_process.wait(wait_s)
            except subprocess.TimeoutExpired:
                return None
        if self._connection is None or self._connection.spawned.pid is None:
            return None
        try:
            return self._connection.wait_exit(wait_s)
        except (TimeoutError, SandboxError):
            return self._connection.spawned.returncode

    def _server_alive(self) -> bool:
        if self._connection is None or self._connection.closed_by_peer:
            return False
        if self._http_process is not None:
            return self._http_process.poll() is None
        pid = self._server_pid()
        return pid is None or (self._connection.spawned.returncode is None and process_exists(pid))

    def _stop_server(self) -> dict[str, Any] | None:
        """Stop the server and release everything its reset made; how it ended when there was one."""
        pid = self._server_pid()
        record: dict[str, Any] | None = None
        if self._http_process is not None and self._connection is not None:
            self._connection.close()  # first, so the client can still end its http session
        if pid is not None and self._entry is not None:
            # The server and its state are discarded, so a stdio server gets SIGTERM at once: waiting
            # for it to exit after stdin closes (the SDK's way) cost Python servers about 1.4 s.
            record = {"server": self._entry.name, "pid": pid}
            record.update(stop_server(pid, self._jailed, self.config.stop_grace_s))
        if self._connection is not None:
            self._connection.close()
        if record is not None:
            record["exit"] = exit_status(self._exit_code(KILL_WAIT_S), self._jailed)
            if "escalated" in record:
                log.warning("MCP server %r (pid %d): %s", record["server"], pid, record["escalated"])
            self.last_stop = record
        if self._site is not None:
            self._site.close()
        if self._output is not None:
            self._output.close()
        if self._jail is not None:
            self._jail.destroy()
        self._connection = self._connected = self._site = self._output = self._jail = None
        self._http_process = None
        self._entry = None
        self._command = None
        return record

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
        # Tuples (a bwrap backend's ro_paths) as lists: the record must survive a JSON round trip.
        config["backend_config"] = {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(self.config.backend).items()
        }
        if self._site is not None:
            config["site"] = self._site.url("/")
        if self._replaced is not None:
            config["replaced_server_stop"] = self._replaced
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

"""MCP sandbox latency on the embedded servers, against the bare `mcp` SDK in the same run.

- call overhead: one `tools/call` through `McpSandbox.step` (parse, the call on the sandbox's loop
  thread, the crash check, the canonical observation) against `await session.call_tool(...)` on a
  bare `ClientSession` over `stdio_client`, both on the same installed server program (ours in
  bwrap, the bare one on the host), both sessions open at once and timed in alternating rounds;
- reset: `McpSandbox.reset` per embedded server: the first one (a new sandbox) and the following
  ones (a fresh server and private directory for stateful servers, the kept server for stateless
  `time`), against a bare `stdio_client` + `initialize` + `list_tools` of the same program.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

from benchmarks.timing import latency_ms
from sandboxes.mcp import TOOL_CALL, McpSandbox, embedded_catalogue, parse_action
from sandboxes.mcp.install import install_package, package_dir, python_home, resolve_program
from sandboxes.mcp.isolation import ServerJail
from sandboxes.mcp.seeds import seed_git
from sandboxes.terminal.config import BwrapBackend
from schemas.records import Task

TARGET_CALL_RATIO = 1.2
# Cheap, side-effect free calls: the time is the round trip, not the tool's work.
CALLS = {
    "time": ("get_current_time", {"timezone": "UTC"}),
    "memory": ("read_graph", {}),
}


def _host_params(server: str, workdir: str) -> StdioServerParameters:
    """The entry's program on the host, no isolation: the bare SDK's own baseline."""
    entry = embedded_catalogue()[server]
    command = [part.replace("{workdir}", workdir).replace("{state}", workdir) for part in entry.command]
    env = {key: value.replace("{state}", workdir) for key, value in entry.env.items()}
    return StdioServerParameters(
        command=resolve_program(entry, command[0]), args=command[1:], env=env, cwd=workdir
    )


def _jailed_params(server: str, tmpdir: Path) -> tuple[StdioServerParameters, ServerJail]:
    """The entry's program in the same bwrap jail the sandbox builds (same argv, same limits)."""
    entry = embedded_catalogue()[server]
    jail = ServerJail(BwrapBackend(), tmpdir)
    jail.hand_over()
    places = jail.placeholders()
    command = [part.format(**places) for part in entry.command]
    env = {key: value.format(**places) for key, value in entry.env.items()}
    binds = [package_dir(entry.package), python_home()]
    program = [resolve_program(entry, command[0]), *command[1:]]
    argv, env, cwd = jail.server_argv(program, env, entry.cwd.format(**places), entry.network, binds)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd), jail


class BareSession:
    """A bare `ClientSession` over `stdio_client`, driven synchronously like the sandbox drives its
    own: a private loop, one holder task that enters the transport and session, and each call run
    with `run_until_complete`. Nothing of the sandbox is used."""

    def __init__(self, params: StdioServerParameters) -> None:
        self.loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        ready: asyncio.Future[ClientSession] = self.loop.create_future()
        self._holder = self.loop.create_task(self._hold(params, ready))
        self.session = self.loop.run_until_complete(asyncio.wait_for(ready, 120))

    async def _hold(self, params: StdioServerParameters, ready: asyncio.Future[ClientSession]) -> None:
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await session.list_tools()
                ready.set_result(session)
                await self._stop.wait()

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(self.session.call_tool(tool, arguments), 60))

    def close(self) -> None:
        self._stop.set()
        self.loop.run_until_complete(asyncio.wait_for(self._holder, 30))
        self.loop.close()


def call_overhead(server: str, n: int = 200) -> dict[str, Any]:
    """Calls rotate through ours / bare SDK in the same jail / bare SDK on the host, so load bursts on
    the shared machine hit all three alike."""
    tool, arguments = CALLS[server]
    action = parse_action(TOOL_CALL, {"name": tool, "arguments": arguments})
    times: dict[str, list[float]] = {"ours": [], "bare_sdk_same_jail": [], "bare_sdk_host": []}
    with tempfile.TemporaryDirectory(prefix="agentworld-mcp-bench-") as workdir:
        jail_dir = Path(workdir) / "jail"
        jail_dir.mkdir()
        os.chmod(workdir, 0o755)
        os.chmod(jail_dir, 0o755)
        jailed_params, jail = _jailed_params(server, jail_dir)
        jailed = host = None
        try:
            jailed = BareSession(jailed_params)
            host = BareSession(_host_params(server, workdir))
            with McpSandbox() as sandbox:
                sandbox.reset(Task(id="bench", metadata={"server": server}))
                runners = {
                    "ours": lambda: sandbox.step(action).observation.data["is_error"],
                    "bare_sdk_same_jail": lambda: jailed.call(tool, arguments).is_error,
                    "bare_sdk_host": lambda: host.call(tool, arguments).is_error,
                }
                order = list(runners)
                for i in range(n + 5):  # five warm-up rounds: validators compiled, caches filled
                    order = order[1:] + order[:1]  # each goes first, second and third in turn
                    for name in order:
                        t0 = time.perf_counter()
                        failed = runners[name]()
                        elapsed = time.perf_counter() - t0
                        assert not failed, f"{name}: the call failed"
                        if i >= 5:
                            times[name].append(elapsed)
        finally:
            for bare in (jailed, host):
                if bare is not None:
                    bare.close()
            jail.destroy()
    summary = {name: latency_ms(samples) for name, samples in times.items()}
    ours = summary["ours"]["median_ms"]
    ratio = ours / summary["bare_sdk_same_jail"]["median_ms"]
    return {
        "call": json.loads(action.text),
        **summary,
        "ratio_to_same_jail": ratio,
        "ratio_to_host": ours / summary["bare_sdk_host"]["median_ms"],
        "target_ratio": TARGET_CALL_RATIO,
        "met": ratio <= TARGET_CALL_RATIO,
    }


def _bare_connect(server: str, workdir: str) -> float:
    t0 = time.perf_counter()
    BareSession(_host_params(server, workdir)).close()
    return time.perf_counter() - t0


def reset_times(server: str, n: int = 3) -> dict[str, Any]:
    task = Task(id="bench", metadata={"server": server})
    following: list[float] = []
    with McpSandbox() as sandbox:
        t0 = time.perf_counter()
        sandbox.reset(task)
        first = time.perf_counter() - t0
        for _ in range(n):
            t0 = time.perf_counter()
            sandbox.reset(task)
            following.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory(prefix="agentworld-mcp-bench-") as workdir:
        if embedded_catalogue()[server].seed == "git":
            seed_git(Path(workdir))
        bare = [_bare_connect(server, workdir) for _ in range(n)]
    return {
        "first_reset_ms": first * 1e3,
        "reset": latency_ms(following),
        "bare_connect": latency_ms(bare),
        "kept_server": embedded_catalogue()[server].state == "none",
    }


def mcp_latency() -> dict[str, Any]:
    for entry in embedded_catalogue().values():
        install_package(entry.package)
    return {
        "call_overhead": {server: call_overhead(server) for server in CALLS},
        "reset": {server: reset_times(server) for server in embedded_catalogue()},
    }


def markdown_lines(r: dict[str, Any]) -> list[str]:
    lines = [
        "| tools/call | ours ms | bare SDK, same jail ms | bare SDK, host ms | n | ours/jail | ours/host |",
        "|---|---|---|---|---|---|---|",
    ]
    for server, v in r["call_overhead"].items():
        medians = [v[k]["median_ms"] for k in ("ours", "bare_sdk_same_jail", "bare_sdk_host")]
        lines.append(
            f"| {server} `{v['call']['name']}` | "
            + " | ".join(f"{m:.2f}" for m in medians)
            + f" | {v['ours']['n']} | {v['ratio_to_same_jail']:.2f}x | {v['ratio_to_host']:.2f}x |"
        )
    met = all(v["met"] for v in r["call_overhead"].values())
    lines.append(
        f"\nMedians. Target ours / bare SDK on the same (jailed) server <= {TARGET_CALL_RATIO}x: "
        f"{'met' if met else 'NOT met'}.\n"
    )
    lines += [
        "| server | first reset ms | next resets median ms | bare SDK start..close ms | server |",
        "|---|---|---|---|---|",
    ]
    for server, v in r["reset"].items():
        kept = "kept (stateless)" if v["kept_server"] else "fresh"
        lines.append(
            f"| {server} | {v['first_reset_ms']:.0f} | {v['reset']['median_ms']:.1f} "
            f"| {v['bare_connect']['median_ms']:.0f} | {kept} |"
        )
    return lines

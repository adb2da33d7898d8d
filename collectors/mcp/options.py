"""The MCP collector's own options, server catalogue and tool listing (see collectors/mcp/__main__.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from collectors.cli import NothingToRecord, Plan, Sandboxes
from collectors.mcp.explorer import McpExplorer, tool_definitions
from collectors.options import CliError, load_task_specs
from collectors.policies.base import Policy
from collectors.tasks import TaskSpec
from sandboxes.base import SandboxError
from sandboxes.mcp import (
    CatalogueError,
    McpConfig,
    McpSandbox,
    ServerEntry,
    embedded_catalogue,
    load_catalogue,
)
from sandboxes.terminal.config import BwrapBackend, LocalBackend
from schemas.records import Task, ToolDefinition

DESCRIPTION = "Record tool-use trajectories against real MCP servers."
BACKEND_HELP = "bwrap isolates stdio servers; local runs them unisolated on this host"
SANDBOXES_ALIAS = "--workers"

ToolsByServer = dict[str, list[ToolDefinition]]


def add_options(parser: argparse.ArgumentParser, group: Any) -> None:
    group.add_argument(
        "--servers", metavar="CATALOGUE", help="JSON or TOML server catalogue (default: the embedded one)"
    )
    group.add_argument(
        "--server", action="append", default=None, metavar="NAME",
        help="record only this catalogue server; repeatable (default: every server the tasks name)",
    )  # fmt: skip
    group.add_argument(
        "--no-install", action="store_true",
        help="fail instead of installing a catalogue server's package missing from the cache",
    )  # fmt: skip
    explorer = parser.add_argument_group("explorer policy")
    explorer.add_argument(
        "--invalid-rate", type=float, default=0.12, metavar="P",
        help="share of calls whose arguments break the tool's schema on purpose (0.12)",
    )  # fmt: skip
    explorer.add_argument(
        "--unknown-tool-rate", type=float, default=0.03, metavar="P",
        help="share of calls to a tool name the server does not have (0.03)",
    )  # fmt: skip


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not (0 <= args.invalid_rate <= 1 and 0 <= args.unknown_tool_rate <= 1 - args.invalid_rate):
        parser.error("--invalid-rate and --unknown-tool-rate must be in [0, 1] and add up to at most 1")


def explorer(args: argparse.Namespace, tools: ToolsByServer | None) -> Policy:
    """Without listed tools (--backend simulator) it calls those a task's metadata.tools names."""
    return McpExplorer(tools or {}, invalid_rate=args.invalid_rate, unknown_tool_rate=args.unknown_tool_rate)


def catalogue(args: argparse.Namespace) -> dict[str, ServerEntry]:
    """The catalogue, narrowed to --server; CliError naming what is wrong."""
    try:
        entries = load_catalogue(args.servers) if args.servers else embedded_catalogue()
    except CatalogueError as exc:
        raise CliError(str(exc)) from exc
    if not args.server:
        return entries
    unknown = sorted(set(args.server) - set(entries))
    if unknown:
        raise CliError(
            f"--server {', '.join(unknown)}: not in the catalogue (it has {', '.join(sorted(entries))})"
        )
    return {name: entry for name, entry in entries.items() if name in args.server}


def server_of(spec: TaskSpec) -> str:
    return str(spec.task.metadata.get("server", ""))


def exploration_task(server: str) -> TaskSpec:
    instruction = (
        f"Find out what the {server} MCP server's tools do by calling them, and report what you learn."
    )
    return TaskSpec(task=Task(id=f"{server}-explore", instruction=instruction, metadata={"server": server}))


def select_tasks(args: argparse.Namespace) -> list[TaskSpec]:
    """The tasks whose server is in the catalogue (narrowed to --server); with the embedded tasks, an
    exploration task for each catalogue server no task names. A --tasks file naming an unknown server
    is an error."""
    servers = catalogue(args)
    specs = load_task_specs(args, "mcp")
    named = {spec.task.metadata.get("server") for spec in specs}
    if args.tasks:
        missing = sorted(str(n) for n in named - set(servers) if args.server is None or n in args.server)
        if missing:
            raise CliError(f"{args.tasks}: metadata.server {', '.join(missing)} not in the catalogue")
        chosen = [spec for spec in specs if spec.task.metadata.get("server") in servers]
        if not chosen:
            raise CliError(f"no task in {args.tasks} names one of the servers {', '.join(sorted(servers))}")
        return chosen
    chosen = [spec for spec in specs if spec.task.metadata.get("server") in servers]
    return chosen + [exploration_task(name) for name in servers if name not in named]


def list_tools(config: McpConfig, servers: Sequence[str]) -> tuple[ToolsByServer, list[str]]:
    """Start each server once and list its tools: (tools by server, the servers that did not start).
    A server that does not start is reported here; its episodes run and fail at their reset, each
    recorded with the reason, while the other servers' episodes go on."""
    print(f"listing the tools of {len(servers)} MCP server(s): {', '.join(servers)}", file=sys.stderr)
    found: ToolsByServer = {}
    failed: list[str] = []
    with McpSandbox(config) as sandbox:
        for name in servers:
            try:
                sandbox.reset(Task(id=f"probe-{name}", metadata={"server": name}))
            except SandboxError as exc:
                failed.append(name)
                print(f"{exc}\n(its episodes are recorded as errors)", file=sys.stderr)
                continue
            found[name] = sandbox.describe().tools
    return found, failed


def with_tool_lookup(build: Callable[[], Policy], tools: ToolsByServer) -> Callable[[], Policy]:
    """The LLM policy factory, its agents shown the tools of each episode's task or server."""

    def lookup(task: Task) -> list[ToolDefinition]:
        return tool_definitions(task.metadata.get("tools")) or tools.get(task.metadata.get("server"), [])

    def make() -> Policy:
        policy = build()
        policy.tool_lookup = lookup  # type: ignore[attr-defined]
        return policy

    return make


def adapt_policy(
    build: Callable[[], Policy], args: argparse.Namespace, tools: ToolsByServer | None
) -> Callable[[], Policy]:
    """The LLM agent is shown the tools each server listed (none under --backend simulator)."""
    return with_tool_lookup(build, tools or {}) if args.policy == "llm" else build


@contextmanager
def sandboxes(plan: Plan) -> Iterator[Sandboxes]:
    """Sandboxes over the catalogue; `found` holds the tools each server listed."""
    args = plan.args
    backend = LocalBackend() if args.backend == "local" else BwrapBackend()
    config = McpConfig(catalogue=catalogue(args), backend=backend, install_missing=not args.no_install)
    if args.backend == "local":
        print("warning: --backend local runs the MCP servers on THIS HOST, unisolated", file=sys.stderr)
    names = list(dict.fromkeys(server_of(spec) for spec in plan.tasks))
    tools, failed = list_tools(config, names)
    if len(failed) == len(names):
        raise NothingToRecord(f"none of the MCP servers started ({', '.join(failed)}): nothing to record")
    yield Sandboxes(lambda: McpSandbox(config), found=tools)

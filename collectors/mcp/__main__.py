"""Record MCP trajectories: `python -m collectors.mcp --servers FILE --workers N --episodes M --out DIR`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from collectors.cli import (
    CliError,
    add_fleet_arguments,
    load_task_specs,
    main_guard,
    open_output,
    policy_factory,
    run_cli,
    simulated,
    simulator_sandboxes,
    validate_counts,
)
from collectors.mcp.explorer import McpExplorer, tool_definitions
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
from sandboxes.mcp import parse_action as parse_mcp_action
from sandboxes.terminal.config import BwrapBackend, LocalBackend
from schemas.records import Task, ToolDefinition

EPILOG = """examples:
  # 2 workers, 20 explorer episodes over the embedded servers (time, git, fetch, filesystem, memory);
  # the first run installs them from PyPI and npm into $AGENTWORLD_CACHE_DIR/mcp-servers
  python -m collectors.mcp --workers 2 --episodes 20 --out data/mcp

  # only the git and memory servers, more deliberately wrong calls
  python -m collectors.mcp --server git --server memory --invalid-rate 0.3 --episodes 10 --out data/mcp-gm

  # your own servers: a JSON or TOML catalogue {"servers": {"name": {"command": [...], ...}}}
  #   [servers.weather]
  #   command = ["/opt/weather/bin/weather-mcp", "--units", "metric"]
  #   call_timeout_s = 20
  python -m collectors.mcp --servers my-servers.toml --episodes 50 --out data/mcp-mine

  # the tasks' own tool calls (metadata.server names the catalogue entry)
  python -m collectors.mcp --policy scripted --episodes 15 --out data/mcp-scripted

  # an LLM agent behind an OpenAI-compatible server; it is shown each server's tool definitions
  python -m collectors.mcp --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --workers 4 --out data/mcp-llm

  # a world model in place of the servers (nothing installed or started): recorded as simulated;
  # the tools it is shown are each task's metadata.tools (the explorer needs them: without, it stops)
  python -m collectors.mcp --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --policy scripted --episodes 15 --out data/mcp-sim

Each task names its server in metadata.server. The embedded tasks cover the embedded servers; a
catalogue server no task names gets one exploration task of its own. Before the fleet starts, each
server is started once and its tools are listed (what the explorer and the LLM agent call); a
server that does not start is reported, its episodes are recorded as errors with the reason, and
the other servers' episodes go on (the run fails only when no server starts).
Servers run in bubblewrap with no network unless their entry says `network = true`. The embedded
tasks name paths as the servers see them there (/home/agent/workdir); under --backend local the
explorer learns the real ones from the servers' answers, and scripted paths do not resolve.
Rerunning the same command resumes: committed episodes are skipped. One collector per --out.
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.mcp",
        description="Record tool-use trajectories against real MCP servers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fleet_arguments(parser, sandboxes_alias="--workers")
    group = parser.add_argument_group("MCP servers")
    group.add_argument(
        "--servers", metavar="CATALOGUE", help="JSON or TOML server catalogue (default: the embedded one)"
    )
    group.add_argument(
        "--server", action="append", default=None, metavar="NAME",
        help="record only this catalogue server; repeatable (default: every server the tasks name)",
    )  # fmt: skip
    group.add_argument(
        "--backend", choices=("bwrap", "local", "simulator"), default="bwrap",
        help="bwrap isolates stdio servers; local runs them unisolated on this host; simulator: a world"
        " model answers instead (needs --model-endpoint) (bwrap)",
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
    args = parser.parse_args(argv)
    if not (0 <= args.invalid_rate <= 1 and 0 <= args.unknown_tool_rate <= 1 - args.invalid_rate):
        parser.error("--invalid-rate and --unknown-tool-rate must be in [0, 1] and add up to at most 1")
    validate_counts(parser, args)
    return args


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


def select_tasks(
    args: argparse.Namespace, specs: list[TaskSpec], servers: dict[str, ServerEntry]
) -> list[TaskSpec]:
    """The tasks whose server is in `servers`; with the embedded tasks, an exploration task for each
    catalogue server no task names. A --tasks file naming an unknown server is an error."""
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


def mcp_config(args: argparse.Namespace, servers: dict[str, ServerEntry]) -> McpConfig:
    backend = LocalBackend() if args.backend == "local" else BwrapBackend()
    return McpConfig(catalogue=servers, backend=backend, install_missing=not args.no_install)


def list_tools(
    config: McpConfig, servers: Sequence[str]
) -> tuple[dict[str, list[ToolDefinition]], list[str]]:
    """Start each server once and list its tools: (tools by server, the servers that did not start).
    A server that does not start is reported here; its episodes run and fail at their reset, each
    recorded with the reason, while the other servers' episodes go on."""
    print(f"listing the tools of {len(servers)} MCP server(s): {', '.join(servers)}", file=sys.stderr)
    found: dict[str, list[ToolDefinition]] = {}
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


def with_tool_lookup(
    build: Callable[[], Policy], tools: dict[str, list[ToolDefinition]]
) -> Callable[[], Policy]:
    """The LLM policy factory, its agents shown the tools of each episode's task or server."""

    def lookup(task: Task) -> list[ToolDefinition]:
        return tool_definitions(task.metadata.get("tools")) or tools.get(task.metadata.get("server"), [])

    def make() -> Policy:
        policy = build()
        policy.tool_lookup = lookup  # type: ignore[attr-defined]
        return policy

    return make


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def run() -> int:
        with open_output(args.out) as lock:
            servers = catalogue(args)
            tasks = select_tasks(args, load_task_specs(args, "mcp"), servers)
            if simulated(args):
                explore = lambda: McpExplorer(  # noqa: E731 - a factory, built per worker
                    {}, invalid_rate=args.invalid_rate, unknown_tool_rate=args.unknown_tool_rate
                )
                policy = policy_factory(args, tasks, parse_action=parse_mcp_action, explorer=explore)
                if args.policy == "llm":
                    policy = (with_tool_lookup(policy[0], {}), policy[1], policy[2])
                return run_cli(args, "mcp", simulator_sandboxes(args, "mcp"), policy, lock)
            config = mcp_config(args, servers)
            if args.backend == "local":
                print(
                    "warning: --backend local runs the MCP servers on THIS HOST, unisolated", file=sys.stderr
                )
            tools: dict[str, list[ToolDefinition]] = {}  # filled below, before any policy is built
            explorer = lambda: McpExplorer(  # noqa: E731 - a factory, built per worker
                tools, invalid_rate=args.invalid_rate, unknown_tool_rate=args.unknown_tool_rate
            )
            factory, tasks, episodes = policy_factory(
                args, tasks, parse_action=parse_mcp_action, explorer=explorer
            )
            names = list(dict.fromkeys(server_of(spec) for spec in tasks))
            listed, failed = list_tools(config, names)
            if len(failed) == len(names):
                started = "none of the MCP servers started"
                print(f"error: {started} ({', '.join(failed)}): nothing to record", file=sys.stderr)
                return 1
            tools.update(listed)
            if args.policy == "llm":
                factory = with_tool_lookup(factory, tools)
            return run_cli(args, "mcp", lambda: McpSandbox(config), (factory, tasks, episodes), lock)

    return main_guard(run)


if __name__ == "__main__":
    sys.exit(main())

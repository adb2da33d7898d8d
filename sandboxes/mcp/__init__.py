"""The MCP domain: real MCP servers (stdio or streamable HTTP) behind the official `mcp` client, one
catalogue server per episode, isolated in bwrap, with the tool definitions in every trajectory."""

from __future__ import annotations

from sandboxes.domains import REPLAY_BACKEND, SandboxHooks, domain_spec
from sandboxes.mcp.actions import ACTION_SPACE, MCP_RESULT, TOOL_CALL, parse_action, tool_call_text
from sandboxes.mcp.catalogue import (
    CatalogueError,
    ServerEntry,
    embedded_catalogue,
    entry_from_dict,
    entry_to_dict,
    load_catalogue,
)
from sandboxes.mcp.sandbox import McpConfig, McpSandbox
from sandboxes.terminal.config import BwrapBackend, LocalBackend
from schemas.records import Environment

INITIAL_TEXT = "An MCP server is connected. No tool has been called yet."


def replay_sandbox(environment: Environment) -> McpSandbox:
    """A fresh sandbox running the recorded server entry; on the host only when the replay asks
    (`replay_backend: local`), so a recording made with the local backend replays in bwrap."""
    config = environment.config
    name = config.get("server")
    if not name or "entry" not in config:
        raise ValueError("this MCP environment records no server entry to replay")
    entry = entry_from_dict(name, config["entry"], "recorded environment")
    choice = str(config.get(REPLAY_BACKEND) or "auto")
    backends = domain_spec("mcp").replay_backends
    if choice != "auto" and choice not in backends:
        raise ValueError(f"the MCP sandbox has no {choice!r} backend; choose {' or '.join(backends)}")
    recorded = dict(config.get("backend_config") or {})
    if choice == "local":
        backend: BwrapBackend | LocalBackend = LocalBackend()
    elif recorded.pop("kind", "") == "bwrap":
        backend = BwrapBackend(**recorded)
    else:
        backend = BwrapBackend()
    return McpSandbox(McpConfig(catalogue={name: entry}, backend=backend))


HOOKS = SandboxHooks(
    parse_action=parse_action,
    action_space=ACTION_SPACE,
    replay_sandbox=replay_sandbox,
    initial_text=INITIAL_TEXT,
)

__all__ = [
    "ACTION_SPACE",
    "HOOKS",
    "MCP_RESULT",
    "TOOL_CALL",
    "CatalogueError",
    "McpConfig",
    "McpSandbox",
    "ServerEntry",
    "embedded_catalogue",
    "entry_from_dict",
    "entry_to_dict",
    "load_catalogue",
    "parse_action",
    "replay_sandbox",
    "tool_call_text",
]

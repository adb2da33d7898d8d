"""The terminal domain: an interactive shell in tmux, isolated by docker, bwrap or nothing (local)."""

from sandboxes.terminal.actions import (
    ACTION_KINDS,
    COMMAND,
    KEYSTROKES,
    command_action,
    is_key_name,
    keystrokes_action,
    parse_action,
)
from sandboxes.terminal.config import (
    BwrapBackend,
    DockerBackend,
    LocalBackend,
    TerminalConfig,
    make_backend,
)
from sandboxes.terminal.domain import HOOKS
from sandboxes.terminal.sandbox import TerminalSandbox

__all__ = [
    "ACTION_KINDS",
    "COMMAND",
    "HOOKS",
    "KEYSTROKES",
    "BwrapBackend",
    "DockerBackend",
    "LocalBackend",
    "TerminalConfig",
    "TerminalSandbox",
    "command_action",
    "is_key_name",
    "keystrokes_action",
    "make_backend",
    "parse_action",
]

"""The SWE domain: a private copy of a code repository with the tools read, edit and bash, bash
isolated by bwrap (default), docker, or nothing (local, only when asked).

The repository and mutation API (`RepoSpec`, `prepare_repo`, `task_template`, `mutate`,
`Mutation`, `revert_patch`) lives in `sandboxes.swe.repos` and `sandboxes.swe.mutation`; it is
re-exported here lazily, so importing the sandbox does not import it.
"""

from __future__ import annotations

import importlib
from typing import Any

from sandboxes.swe.actions import (
    ACTION_KINDS,
    BASH,
    EDIT,
    READ,
    TOOLS,
    bash_action,
    edit_action,
    parse_action,
    read_action,
)
from sandboxes.swe.config import SweConfig, make_config
from sandboxes.swe.domain import HOOKS
from sandboxes.swe.sandbox import FORMAT, SweSandbox

_LAZY = {
    "RepoSpec": "sandboxes.swe.repos",
    "prepare_repo": "sandboxes.swe.repos",
    "task_template": "sandboxes.swe.repos",
    "Mutation": "sandboxes.swe.mutation",
    "mutate": "sandboxes.swe.mutation",
    "revert_patch": "sandboxes.swe.mutation",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sandboxes.swe' has no attribute {name!r}")


__all__ = [
    "ACTION_KINDS",
    "BASH",
    "HOOKS",
    "EDIT",
    "FORMAT",
    "READ",
    "TOOLS",
    "SweConfig",
    "SweSandbox",
    "bash_action",
    "edit_action",
    "make_config",
    "parse_action",
    "read_action",
]

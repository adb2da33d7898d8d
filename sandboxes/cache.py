"""Where sandboxes keep what they build once and reuse (search indexes, MCP server installs, SWE
repositories): $AGENTWORLD_CACHE_DIR, else the XDG cache. A leaf module, so that asking for the
path imports no domain's dependencies."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    if os.environ.get("AGENTWORLD_CACHE_DIR"):
        return Path(os.environ["AGENTWORLD_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agentworld"

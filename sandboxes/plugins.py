"""Sandboxes that live outside this package, found through Python entry points.

The simulated sandbox is a world model, so it lives in `training/`, which imports `sandboxes`; the
other way round would be a cycle. Code here and in `collectors/` reaches it through the entry point
group below, which the installed distribution registers (pyproject.toml):

    [project.entry-points."agentworld.sandboxes"]
    simulator = "training.simulator:endpoint_factory"

The registered callable takes `(domain, endpoint, *, model=None, api_key=None, max_new_tokens=...)`
and returns a zero-argument sandbox factory; every sandbox it makes shares one client of the endpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any

from sandboxes.base import Sandbox, SandboxError

GROUP = "agentworld.sandboxes"
SIMULATOR = "simulator"


class PluginMissingError(SandboxError):
    """No installed distribution registers the sandbox asked for."""


def simulator_factory(domain: str, endpoint: str, **options: Any) -> Callable[[], Sandbox]:
    """A factory of simulated sandboxes of `domain` over the world model served at `endpoint` (an
    OpenAI-compatible URL such as http://127.0.0.1:8000/v1). Options go to the registered callable
    (model, api_key, max_new_tokens, temperature)."""
    found = [ep for ep in metadata.entry_points(group=GROUP) if ep.name == SIMULATOR]
    if not found:
        raise PluginMissingError(
            f"no simulated sandbox is installed (entry point {SIMULATOR!r} in group {GROUP!r}); it comes"
            " with the training extra: pip install -e '.[training]'"
        )
    return found[0].load()(domain, endpoint, **options)

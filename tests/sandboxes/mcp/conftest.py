"""Fixtures for the MCP sandbox tests: the embedded servers installed once (a no-op when they are),
and one bwrap sandbox per module, shared by the tests that reset it to their server."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from sandboxes.checks import resource_exists
from sandboxes.mcp import McpSandbox, embedded_catalogue
from sandboxes.mcp.install import install_package
from schemas.records import Observation, Task


class TrackedSandbox(McpSandbox):
    """Remembers everything each reset held, so a test can check nothing survives close()."""

    held: set[str]

    def reset(self, task: Task) -> Observation:
        observation = super().reset(task)
        self.held = getattr(self, "held", set()) | set(self.resources())
        return observation

    def assert_nothing_left(self) -> None:
        leaked = sorted(r for r in getattr(self, "held", set()) if resource_exists(r))
        assert not leaked, f"MCP sandbox resources survived close(): {leaked}"


@pytest.fixture(scope="session")
def installed() -> None:
    for tool in ("bwrap", "npm", "git"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (see infra/setup-host.sh)")
    for entry in embedded_catalogue().values():
        install_package(entry.package)  # what `python -m sandboxes.mcp install` does in setup


@pytest.fixture(scope="module")
def sandbox(installed: None) -> Iterator[TrackedSandbox]:
    """A started bwrap sandbox with the embedded catalogue."""
    box = TrackedSandbox()
    box.start()
    yield box
    box.close()
    box.assert_nothing_left()

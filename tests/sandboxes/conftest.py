"""Fixtures for sandbox tests: real tmux, docker and bwrap; a missing component fails loudly."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator

import pytest

from sandboxes.checks import resource_exists
from sandboxes.terminal import TerminalConfig, TerminalSandbox, make_backend
from sandboxes.terminal.config import DEFAULT_IMAGE


@pytest.fixture(scope="session")
def terminal_image() -> str:
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode:
        pytest.fail("docker is not available: install docker.io and start dockerd")
    found = subprocess.run(["docker", "image", "inspect", DEFAULT_IMAGE], capture_output=True)
    if found.returncode != 0:
        pytest.fail(f"image {DEFAULT_IMAGE} is missing: run `bash infra/terminal-image/build.sh`")
    return DEFAULT_IMAGE


@pytest.fixture
def make_sandbox(request: pytest.FixtureRequest) -> Iterator[Callable[..., TerminalSandbox]]:
    """Factory: make_sandbox("docker", command_timeout=2) -> a reset-ready TerminalSandbox.

    Every sandbox made is closed at teardown, and nothing it held may survive.
    """
    made: list[TerminalSandbox] = []
    held: set[str] = set()

    def make(backend: str, **config: object) -> TerminalSandbox:
        if backend == "docker":
            request.getfixturevalue("terminal_image")
        for tool in ("tmux", "bwrap") if backend == "bwrap" else ("tmux",):
            if shutil.which(tool) is None:
                pytest.fail(f"{tool} is not installed (apt-get install {tool})")
        sandbox = TerminalSandbox(TerminalConfig(backend=make_backend(backend), **config))  # type: ignore[arg-type]
        made.append(sandbox)
        sandbox.start()
        held.update(sandbox.resources())
        return sandbox

    yield make
    for sandbox in made:
        held.update(sandbox.resources())
        sandbox.close()
    leaked = sorted(r for r in held if resource_exists(r))
    assert not leaked, f"sandbox resources survived close(): {leaked}"

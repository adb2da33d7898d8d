"""How the desktop sandbox reaches the machine its desktop runs on.

The desktop itself (Xvfb, window manager, session bus, AT-SPI, applications) is started and driven
by one guest program, `sandboxes/desktop/guest/agent.py` (copied with the guest modules beside it),
run with the target's own `python3` (AT-SPI's Python bindings are not on PyPI). It talks JSON lines
on stdin/stdout. The same program runs in a local bubblewrap sandbox, on a remote host over SSH, or
in a QEMU virtual machine over SSH; only the transport that starts it and carries its lines differs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path


class Channel(ABC):
    """A started guest program: one request line in, one response line out."""

    @abstractmethod
    def send_line(self, line: str) -> None:
        """Write `line` and a newline to the program's stdin; SandboxCrashedError if it is gone."""

    @abstractmethod
    def recv_line(self, timeout_s: float) -> str:
        """The program's next stdout line, without its newline. TimeoutError when none comes in
        `timeout_s`; SandboxCrashedError (with the program's last stderr lines) when it exited."""

    @abstractmethod
    def alive(self) -> bool: ...

    @abstractmethod
    def kill(self) -> None:
        """Stop the program and everything it started; idempotent."""


class Transport(ABC):
    """One target machine (or local sandbox) for one desktop sandbox."""

    kind: str = ""  # "local", "ssh" or "vm": recorded in the trajectory's environment

    @abstractmethod
    def spawn(self, argv: list[str], env: dict[str, str]) -> Channel:
        """Start `argv` on the target (argv[0] resolved there) with `env` added to its environment."""

    @abstractmethod
    def put_file(self, local: Path, remote: str) -> None:
        """Copy a host file to `remote` on the target (a path under `workdir()`)."""

    @abstractmethod
    def workdir(self) -> str:
        """A private directory on the target, removed by `close`."""

    @abstractmethod
    def resources(self) -> list[str]:
        """What this transport holds, in `sandboxes.checks.resource_exists` form, for leak checks."""

    @abstractmethod
    def close(self) -> None:
        """Kill what was spawned, remove `workdir()`, drop the connection; idempotent."""

"""Desktop sandbox configuration: the screen, the observation's bounds, the waits, and the limits of
the local bubblewrap sandbox. Where the desktop runs (local, SSH, VM) is the transport, not config."""

from __future__ import annotations

from dataclasses import dataclass, field

from sandboxes.terminal.config import BwrapBackend

# The applications a task may name in `metadata.apps` (the guest's APPS table, guest/session.py).
APPLICATIONS = ("calculator", "editor", "terminal")


def _local_limits() -> BwrapBackend:
    # GTK applications reserve large virtual ranges: rlimit mode (RLIMIT_AS per process) needs room.
    return BwrapBackend(memory="2g", pids_limit=512, cpus=1.0, cpu_seconds=3600)


@dataclass(frozen=True)
class DesktopConfig:
    width: int = 1280
    height: int = 800
    # Tree lines in an observation; more become one `[... N more nodes not shown]` line.
    max_nodes: int = 400
    screenshot: bool = True
    # A step waits for two identical tree snapshots `settle_interval` apart, at most `settle_timeout`.
    settle_timeout: float = 3.0
    settle_interval: float = 0.05
    # Longest wait for an application's first window at reset, and for one action to run. A first
    # gnome-calculator on a loaded 2-core host once took over 30 s; a healthy start takes about 1.
    app_timeout: float = 60.0
    action_timeout: float = 60.0
    # Longest wait for the guest's session (Xvfb, buses, window manager) to come up.
    start_timeout: float = 60.0
    # Applications a task gets when its metadata names none.
    default_apps: tuple[str, ...] = ("calculator",)
    # The target's Python, which has the AT-SPI bindings (not on PyPI).
    python: str = "/usr/bin/python3"
    # With a transport that can restore its whole machine (a VM's booted snapshot), each reset after
    # the first restores it and starts a fresh session, so nothing an episode changed outside the
    # home survives. False keeps the machine and resets only the session (faster under emulation).
    restore_machine: bool = True
    # Resource limits of the local bubblewrap sandbox (cgroup where possible, else rlimits).
    local_limits: BwrapBackend = field(default_factory=_local_limits)

    def __post_init__(self) -> None:
        if self.width < 64 or self.height < 64 or self.max_nodes < 1:
            raise ValueError("desktop config needs width and height >= 64 and max_nodes >= 1")
        if min(self.settle_timeout, self.settle_interval, self.app_timeout, self.action_timeout) <= 0:
            raise ValueError("desktop config timeouts must be positive")
        unknown = [a for a in self.default_apps if a not in APPLICATIONS]
        if unknown:
            raise ValueError(f"unknown default app(s) {unknown}; choose from {', '.join(APPLICATIONS)}")

    def guest_args(self) -> list[str]:
        """The guest agent's command-line options for this config."""
        return [
            f"--width={self.width}",
            f"--height={self.height}",
            f"--max-nodes={self.max_nodes}",
            "--screenshot" if self.screenshot else "--no-screenshot",
            f"--settle-timeout={self.settle_timeout}",
            f"--settle-interval={self.settle_interval}",
            f"--app-timeout={self.app_timeout}",
            f"--action-timeout={self.action_timeout}",
        ]

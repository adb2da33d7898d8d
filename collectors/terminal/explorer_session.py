"""What the explorer knows during one episode; its moves read and update it."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from collectors.terminal.screen import SHELL
from sandboxes.terminal.actions import command_action, keystrokes_action
from schemas.records import Action


@dataclass
class Session:
    """What the explorer knows during one episode; moves read and update it."""

    rng: random.Random
    command_timeout: float
    mode: str = SHELL
    mode_steps: int = 0
    steps: int = 0
    cwd: str = ""
    screen: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    files: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    last_command: str = ""
    expect_mode: str | None = None
    fix: str | None = None
    pending: list[Action] = field(default_factory=list)
    scratch: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.timed_out or (self.exit_code is not None and self.exit_code != 0)

    def cmd(self, command: str, fix: str | None = None) -> Action:
        """A shell command; `fix` is what a user would type after it fails."""
        self.last_command = command
        self.expect_mode = None
        self.scratch["fix"] = fix
        return command_action(command, timeout=self.command_timeout)

    def keys(self, items: list[tuple[str, float]], expect: str | None = None, command: str = "") -> Action:
        """Keystrokes; `expect` is the program they start (when the screen alone cannot tell)."""
        self.last_command = command
        self.expect_mode = expect
        self.scratch["fix"] = None
        return keystrokes_action(items)

    def pick(self, options: list[Any] | tuple[Any, ...]) -> Any:
        return options[self.rng.randrange(len(options))]

    def known_file(self, suffixes: tuple[str, ...] = ()) -> str | None:
        pool = [f for f in self.files if not suffixes or f.endswith(suffixes)]
        return self.pick(pool) if pool else None

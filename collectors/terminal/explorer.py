"""The embedded default terminal policy: varied, realistic shell sessions without a model.

An episode is a walk over small "moves" (see explorer_moves.py), each with a weight, the modes it
applies in (the shell, or an interactive program such as the python REPL, vim, less) and a guard
on what the explorer has seen. The explorer reads every screen: it learns file and directory
names from `ls`/`find` output, notices which program owns the terminal and sends the keys that
program understands, and often re-tries after an error. All randomness comes from the rng given
at reset, so a seed and the same screens give the same session.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from collectors.policies.explorer import Explorer
from collectors.terminal import explorer_programs  # noqa: F401  (registers the interactive-program moves)
from collectors.terminal.explorer_moves import choose_move
from collectors.terminal.explorer_session import Session
from collectors.terminal.screen import SHELL, output_after, parse_listing, screen_mode
from schemas.records import Action, Observation, Task

_WORD = re.compile(r"\b[A-Za-z][A-Za-z_]{3,14}\b")


@dataclass(eq=False)
class ExplorerPolicy(Explorer):
    name = "explorer"
    stop_probability: float = 0.04
    min_steps: int = 4
    retry_probability: float = 0.7
    command_timeout: float = 10.0
    session: Session | None = field(default=None, init=False, repr=False)

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        self.session = Session(rng=rng, command_timeout=self.command_timeout)
        self._observe(observation)

    def act(self, observation: Observation) -> Action | None:
        session = self.started(self.session)
        self._observe(observation)
        session.steps += 1
        if session.pending:
            return session.pending.pop(0)
        rng = session.rng
        if session.mode == SHELL and session.steps > self.min_steps and rng.random() < self.stop_probability:
            return None
        fix = session.fix
        session.fix = None
        if fix is not None and session.mode == SHELL and rng.random() < self.retry_probability:
            return session.cmd(fix)
        return choose_move(session)

    def _observe(self, observation: Observation) -> None:
        session = self.session
        assert session is not None
        text = observation.text
        data = observation.data or {}
        session.screen = text
        session.exit_code = data.get("exit_code")
        session.timed_out = bool(data.get("timed_out"))
        mode = screen_mode(text)
        if mode is None:
            # A program whose screen has no signature (bc, `cat >`, less's first page): trust what
            # was started, or stay where we were.
            mode = session.expect_mode or session.mode
        if mode != session.mode:
            session.mode, session.mode_steps = mode, 0
        else:
            session.mode_steps += 1
        cwd = data.get("cwd")
        if isinstance(cwd, str) and cwd != session.cwd:
            session.cwd, session.files, session.dirs = cwd, [], []
        if mode == SHELL:
            self._learn(text, session)

    def _learn(self, text: str, session: Session) -> None:
        command = session.last_command
        if command.startswith(("ls", "find")) and not session.failed:
            files, dirs = parse_listing(output_after(text, command))
            if (
                command.startswith("ls")
                and len(command.split()) > 1
                and not command.split()[-1].startswith("-")
            ):
                prefix = command.split()[-1].rstrip("/") + "/"
                files, dirs = [prefix + f for f in files], [prefix + d for d in dirs]
            session.files = sorted(set(session.files) | set(files))
            session.dirs = sorted(set(session.dirs) | set(dirs))
        if session.failed:
            fix = session.scratch.get("fix")
            if fix:
                session.fix = fix
            elif "No such file or directory" in text or "command not found" in text:
                session.fix = "ls -F"
        seen = sorted(set(_WORD.findall(text)))
        if seen:
            session.words = seen[-60:]

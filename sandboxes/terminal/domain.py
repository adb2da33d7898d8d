"""The terminal domain's spec for domain-agnostic code (sandboxes.domains): its action space as an LLM
agent writes it, and a fresh sandbox like the one a recording was made in, for fidelity replays.
"""

from __future__ import annotations

import dataclasses

from sandboxes.domains import REPLAY_BACKEND, SandboxHooks, domain_spec
from sandboxes.terminal.actions import parse_action
from sandboxes.terminal.config import DockerBackend, TerminalConfig, recorded_backend
from sandboxes.terminal.sandbox import TerminalSandbox
from schemas.records import Environment

ACTION_SPACE = (
    "Each turn you see the current terminal screen. Reply with exactly one JSON object and nothing else:\n"
    + """- run a one-line shell command and wait for it to finish (timeout in seconds is optional):
  {"command": "ls -la"} or {"command": "make", "timeout": 120}
- send raw keys (tmux key names such as C-c, Enter, Escape), each followed by a pause in seconds:
  {"keystrokes": [{"keystrokes": "C-c", "duration": 0.5}]}
- stop when the task is finished: {"done": true}"""
)


def recorded_config(environment: Environment, backend: str = "auto") -> TerminalConfig:
    """The sandbox configuration a trajectory was recorded with (its `environment`). `backend`
    overrides the recorded one ("auto" keeps it); a recording made on the host itself (`local`) or by
    an unknown backend is replayed under bwrap, since replaying recorded actions must never touch
    the host."""
    env = environment
    chosen = recorded_backend(env, backend, domain_spec("terminal").replay_backends)
    if isinstance(chosen, DockerBackend) and env.backend == "docker" and env.image:
        chosen = dataclasses.replace(chosen, image=env.image)
    screen = {k: int(env.config[k]) for k in ("width", "height") if env.config.get(k)}
    return TerminalConfig(backend=chosen, **screen)


def replay_sandbox(environment: Environment) -> TerminalSandbox:
    """A fresh, not yet started sandbox like the recorded one, never on the host."""
    backend = str(environment.config.get(REPLAY_BACKEND) or "auto")
    return TerminalSandbox(recorded_config(environment, backend))


HOOKS = SandboxHooks(
    parse_action=parse_action,
    action_space=ACTION_SPACE,
    replay_sandbox=replay_sandbox,
    initial_text="agent@sandbox:~$",
)

"""The SWE domain's spec for domain-agnostic code (sandboxes.domains): its action space as an LLM
agent writes it, and a fresh sandbox like the one a recording was made in, for fidelity replays.

A replay resets the fresh sandbox to the recorded task, whose metadata names the same template or
the same repository, version and seed; the recorded `cache_dir` finds the prepared repository.
"""

from __future__ import annotations

from pathlib import Path

from sandboxes.domains import REPLAY_BACKEND, SandboxHooks, domain_spec
from sandboxes.swe.actions import parse_action
from sandboxes.swe.config import SweConfig
from sandboxes.swe.sandbox import CACHE_DIR, SweSandbox
from sandboxes.terminal.config import recorded_backend
from schemas.records import Environment

ACTION_SPACE = """Each turn you see the result of your last tool call. Write one JSON object per turn:
{"action": <tool>, ...arguments}. Paths are relative to the repository root.
- read a file with line numbers (optionally a range), or list a directory:
  {"action": "read", "path": "src/pkg/core.py"}; {"action": "read", "path": "src/pkg/core.py",
  "start_line": 10, "end_line": 40}; {"action": "read", "path": "."}
- edit a file; str_replace needs an old_str that occurs exactly once; insert goes after a line
  (0: at the top); the answer is the unified diff of the change or the error:
  {"action": "edit", "command": "str_replace", "path": "src/pkg/core.py", "old_str": "a < b",
  "new_str": "a <= b"}
  {"action": "edit", "command": "create", "path": "notes.txt", "file_text": "..."}
  {"action": "edit", "command": "insert", "path": "src/pkg/core.py", "insert_line": 3,
  "new_str": "import os"}
- run a bash command from the repository root, without network (timeout_s is optional):
  {"action": "bash", "command": "python -m pytest -q", "timeout_s": 120}
- stop when the task is finished: {"done": true}"""


def recorded_config(environment: Environment, backend: str = "auto") -> SweConfig:
    """The configuration a trajectory was recorded with; `backend` overrides the recorded one
    ("auto" keeps it). A recording made on the host (`local`) is replayed under bwrap."""
    env = environment
    kept = {k: int(env.config[k]) for k in ("command_timeout_s", "max_output_bytes") if env.config.get(k)}
    if env.config.get(CACHE_DIR):
        kept[CACHE_DIR] = Path(env.config[CACHE_DIR])
    return SweConfig(backend=recorded_backend(env, backend, domain_spec("swe").replay_backends), **kept)


def replay_sandbox(environment: Environment) -> SweSandbox:
    """A fresh, not yet started sandbox like the recorded one, never on the host."""
    backend = str(environment.config.get(REPLAY_BACKEND) or "auto")
    return SweSandbox(recorded_config(environment, backend))


HOOKS = SandboxHooks(
    parse_action=parse_action,
    action_space=ACTION_SPACE,
    replay_sandbox=replay_sandbox,
    initial_text="Repository at /repo.",
)

"""Typed trajectory records: the data contract every package speaks (DESIGN.md section 3).

These dataclasses are the single source of truth. The pyarrow schema in `schemas.arrow` is
derived from their type hints, so the two cannot drift. Open-ended maps (`arguments`, `data`,
`info`, `config`, `metadata`) are JSON objects, stored as JSON text in Parquet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schemas.domains import KNOWN_DOMAINS

# 2: Environment.tools (tool definitions) added; version 1 files read with no tools.
# 3: Task.verifier, Outcome.reward and Outcome.verification added; older files read with none.
# 4: Provenance.source (the public dataset row an imported trajectory came from); older files: none.
# 5: Verification.turns (the check as extra turns, schemas.verification_turns); older files: none.
SCHEMA_VERSION = 5

DOMAINS = KNOWN_DOMAINS  # one record each in schemas.domains
OUTCOMES = ("completed", "truncated", "error", "aborted")


@dataclass
class Attachment:
    """A blob (screenshot, full output) stored once by content hash and referenced by URI.

    A sandbox may hand over `content` in memory; the writer stores it, fills `uri`, and drops it.
    """

    name: str
    media_type: str
    sha256: str = ""
    size: int = 0
    uri: str = ""
    content: bytes | None = field(default=None, repr=False, compare=False, metadata={"transient": True})


@dataclass
class Observation:
    format: str  # e.g. "terminal_screen", "json", "a11y_tree", "markdown"
    text: str  # the canonical text a world model sees
    data: dict[str, Any] = field(default_factory=dict)
    attachments: list[Attachment] = field(default_factory=list)


@dataclass
class Action:
    kind: str  # e.g. "keystrokes", "command", "invalid"
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str = ""  # the action as a world model is shown it


@dataclass
class Step:
    index: int
    action: Action
    observation: Observation
    started_at: datetime
    latency_s: float
    reward: float | None = None
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolDefinition:
    """One tool an environment offers (an MCP server's tool, a SWE workspace's `edit`).

    The world model's system prompt lists them, so they are part of the contract, not metadata.
    The schemas are JSON Schema objects as the server published them.
    """

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None


@dataclass
class Environment:
    name: str  # e.g. "terminal"
    backend: str  # e.g. "docker", "bwrap", "local"
    image: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    # The tools the environment offered at reset, in the order it listed them (schema version 2).
    tools: list[ToolDefinition] = field(default_factory=list)


@dataclass
class Task:
    id: str
    instruction: str = ""
    setup: list[str] = field(default_factory=list)
    max_steps: int = 0  # 0: the collector's default
    metadata: dict[str, Any] = field(default_factory=dict)
    # How the end state is checked: {"kind": ..., ...}, read by the sandbox's `verify`; {} is none.
    verifier: dict[str, Any] = field(default_factory=dict)


@dataclass
class Policy:
    name: str
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verification:
    """What a task's verifier found in the sandbox after the episode (schema version 3)."""

    verifier: str  # the verifier's kind: "command", "swe_tests", "harbor", "site_state", ...
    reward: float | None = None  # in [0, 1]; None when the verifier itself could not run (`error`)
    output: str = ""  # the verifier's own output (a test log, a check's stdout), capped
    details: dict[str, Any] = field(default_factory=dict)  # per-check results, partial credit
    elapsed_s: float = 0.0
    error: str = ""
    # The check as turns of the episode: what the verifier asked the environment and what it answered
    # (schema version 5; see schemas.verification_turns). Never agent steps: not in Trajectory.steps.
    turns: list[Step] = field(default_factory=list)


@dataclass
class Outcome:
    status: str  # one of OUTCOMES
    error: str = ""
    error_kind: str = ""
    reward: float | None = None  # the task reward: the verifier's, or None when none was run
    verification: Verification | None = None


@dataclass
class Source:
    """The public dataset row an imported trajectory was converted from (schema version 4)."""

    dataset: str  # e.g. "nebius/SWE-agent-trajectories", or the file's own name
    format: str  # the importer that read it, e.g. "swe_agent"
    row_id: str  # the row's own id, or `file:line` / `file#index` where the data has none
    version: str = ""  # the dataset's revision or release, as the user gave it
    license: str = ""  # an SPDX identifier where the dataset card names one
    uri: str = ""  # where it was read from


@dataclass
class Provenance:
    collector: str
    collector_version: str
    host: str
    started_at: datetime
    finished_at: datetime
    simulated: bool = False
    source: Source | None = None  # set for imported trajectories, None for captured ones


@dataclass
class Trajectory:
    trajectory_id: str
    domain: str
    environment: Environment
    task: Task
    policy: Policy
    initial_observation: Observation
    steps: list[Step]
    outcome: Outcome
    provenance: Provenance
    schema_version: int = SCHEMA_VERSION

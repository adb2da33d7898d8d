"""What every importer shares: a row of a public dataset in, one trajectory of our schema out.

A format module (one per public format, DESIGN.md section 4c) defines an `Importer` subclass and names
it `IMPORTER`. It says how its inputs are read (`read`, by default rows streamed by
`collectors.importers.reading`) and how one row becomes a `Trajectory` (`convert`); a row that cannot
raises `BadRow` with the reason, which goes to the dead-letter file while the run goes on. The driver
(`collectors.importers.run`) does the rest: provenance, stable ids, resume, validation and writing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from collectors.importers import reading
from schemas.records import (
    Action,
    Environment,
    Observation,
    Outcome,
    Policy,
    Provenance,
    Source,
    Step,
    Task,
    ToolDefinition,
    Trajectory,
)

COLLECTOR = "collectors.importers"


class BadRow(ValueError):
    """A source row that cannot become a trajectory; the message is the reason a person reads."""


@dataclass
class SourceRow:
    """One record of the input: `row_id` is stable across runs (the resume key), `data` the raw row."""

    row_id: str
    data: Any
    uri: str = ""


@dataclass
class ImportContext:
    """What the user said about the dataset, and the run's own facts, for provenance."""

    dataset: str
    version: str
    license: str
    collector_version: str
    host: str
    domain: str = ""  # --domain, for formats whose rows do not say which domain they are
    imported_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass
class Turn:
    """One step as a format module sees it: the action and the observation that answered it."""

    action: Action
    observation: Observation
    reward: float | None = None
    info: dict[str, Any] = field(default_factory=dict)
    # Where the source times its steps (ATIF does): when the step began and how long it took.
    started_at: datetime | None = None
    latency_s: float = 0.0  # 0: not recorded
    done: bool | None = None  # None: done on the last step only (where the source does not say)


@dataclass
class Episode:
    """A converted row, before the driver adds the ids, times and provenance every import shares."""

    domain: str
    task: Task
    initial: Observation
    turns: list[Turn]
    environment: Environment
    policy: Policy
    outcome: Outcome = field(default_factory=lambda: Outcome(status="completed"))
    started_at: datetime | None = None  # when the source recorded one
    tools: list[ToolDefinition] = field(default_factory=list)


class Importer:
    """One public format. Subclasses set the class attributes and implement `convert`."""

    name: ClassVar[str]  # the FORMAT argument, e.g. "swe_agent"
    dataset: ClassVar[str]  # the public dataset it is made for, the default --dataset
    license: ClassVar[str] = ""  # that dataset's licence (SPDX), the default --license
    summary: ClassVar[str]  # one line for `--help`
    id_field: ClassVar[str | None] = None  # the row's own id column, when the dataset has one

    def read(self, source: str) -> Iterator[SourceRow]:
        """The rows of `source` (a path, glob or fsspec URI), streamed. Formats of one recording per
        file (`.traj`, `.cast`) override this."""
        for index, uri, row in reading.stream_rows(source):
            yield SourceRow(row_id=self.row_id(row, index, uri), data=row, uri=uri)

    def row_id(self, row: Any, index: int, uri: str) -> str:
        if self.id_field and isinstance(row, dict) and row.get(self.id_field) not in (None, ""):
            return str(row[self.id_field])
        return f"{reading.display_name(uri)}#{index}"

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        raise NotImplementedError


def trajectory_id(format_name: str, dataset: str, row_id: str) -> str:
    """Stable across runs and machines, so a rerun finds what an earlier one finished."""
    digest = hashlib.sha256(f"{dataset}\0{row_id}".encode()).hexdigest()[:20]
    return f"{format_name}-{digest}"


def build_trajectory(
    importer: Importer, row: SourceRow, episode: Episode, context: ImportContext
) -> Trajectory:
    started = episode.started_at or context.imported_at
    steps = [
        Step(
            index=i,
            action=turn.action,
            observation=turn.observation,
            started_at=turn.started_at or started,
            latency_s=turn.latency_s,  # public traces rarely time their steps; 0 says "not recorded"
            reward=turn.reward,
            done=i == len(episode.turns) - 1 if turn.done is None else turn.done,
            info=turn.info,
        )
        for i, turn in enumerate(episode.turns)
    ]
    source = Source(
        dataset=context.dataset,
        format=importer.name,
        row_id=row.row_id,
        version=context.version,
        license=context.license,
        uri=row.uri,
    )
    environment = episode.environment
    if episode.tools:
        environment.tools = episode.tools
    return Trajectory(
        trajectory_id=trajectory_id(importer.name, context.dataset, row.row_id),
        domain=episode.domain,
        environment=environment,
        task=episode.task,
        policy=episode.policy,
        initial_observation=episode.initial,
        steps=steps,
        outcome=episode.outcome,
        provenance=Provenance(
            collector=COLLECTOR,
            collector_version=context.collector_version,
            host=context.host,
            started_at=started,
            finished_at=started,
            source=source,
        ),
    )


def excerpt(data: Any, limit: int = 2000) -> str:
    """A row as the dead-letter file shows it: JSON where it can be, cut to `limit` characters."""
    try:
        text = json.dumps(data, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        try:
            text = repr(data)
        except RecursionError:  # rows are read with a depth limit; this is a converter's own value
            text = f"<a {type(data).__name__} nested too deep to show>"
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


def require(row: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str = "") -> Any:
    """row[key] when it is of `kind`, else BadRow naming the field: the reason a dead letter gives."""
    if not isinstance(row, dict):
        raise BadRow(f"expected a JSON object{where}, got {type(row).__name__}")
    if key not in row or row[key] is None:
        raise BadRow(f"missing field {key!r}{where}")
    value = row[key]
    if not isinstance(value, kind):
        names = "/".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise BadRow(f"field {key!r}{where} should be {names}, got {type(value).__name__}")
    return value

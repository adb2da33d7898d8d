"""What every stage does with a record it cannot keep: count it and send it to the dead letter.

A stage that can reject records returns a dict `{"ok": PCollection, "dead_letter": PCollection}`;
dead-letter elements are `DeadLetter` records, written by the pipeline under OUT/dead_letter/ as
JSONL so a user sees which file, row or trajectory failed, at which stage, and why.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from apache_beam.metrics import Metrics

OK = "ok"
DEAD_LETTER = "dead_letter"
NAMESPACE = "agentworld"


@dataclass(frozen=True)
class DeadLetter:
    stage: str  # e.g. "read", "validate", "filter"
    reason: str  # a short machine-readable kind, e.g. "corrupt_file", "invalid_field", "one_step"
    detail: str  # the human-readable message (field path, exception text)
    source: str = ""  # file path, when known
    trajectory_id: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def count(stage: str, name: str, n: int = 1) -> None:
    """Increment the Beam counter `<stage>/<name>` (reported at the end of a run)."""
    Metrics.counter(NAMESPACE, f"{stage}/{name}").inc(n)

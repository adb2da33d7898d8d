"""Stage 2: check each trajectory against the data contract (`schemas.validate`).

A valid trajectory is also counted by where it came from, in the stage namespace "sources":
`dataset.<name>` and `license.<SPDX id or "unknown">` for a trajectory imported from a public dataset
(`Provenance.source`), `captured` for one our own collectors recorded. The counters land in
OUT/report.json, where the Hub export (`beam_pipelines.exports.hub`) reads the licences of the corpus.
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam

from beam_pipelines.dead_letter import DEAD_LETTER, OK, DeadLetter, count
from schemas import Trajectory, ValidationError, validate

STAGE = "validate"
SOURCES = "sources"


def count_source(t: Trajectory) -> None:
    """Count the trajectory under its public dataset and licence, or as captured by us."""
    source = t.provenance.source
    if source is None:
        count(SOURCES, "captured")
        return
    count(SOURCES, f"dataset.{source.dataset}")
    count(SOURCES, f"license.{source.license or 'unknown'}")


class _Validate(beam.DoFn):
    def process(self, t: Trajectory) -> Iterator[object]:
        try:
            validate(t)
        except ValidationError as exc:
            count(STAGE, "invalid_field")
            # str(exc) already names the trajectory and the dotted field path.
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTER, DeadLetter(STAGE, "invalid_field", str(exc), trajectory_id=exc.trajectory_id)
            )
            return
        count(STAGE, "valid")
        count_source(t)
        yield t


class ValidateTrajectories(beam.PTransform):
    """Trajectory -> {"ok": valid Trajectory, "dead_letter": DeadLetter(reason="invalid_field")}."""

    def expand(self, trajectories: beam.PCollection) -> dict[str, beam.PCollection]:
        results = trajectories | "Validate" >> beam.ParDo(_Validate()).with_outputs(DEAD_LETTER, main=OK)
        return {OK: results[OK], DEAD_LETTER: results[DEAD_LETTER]}

"""Simulated trajectories (a collector's --backend simulator, or a --fallback-simulator takeover) are
dropped by the filter stage with reason "simulated", counted like every other dead letter."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages.filter import FilterTrajectories, rejection
from tests.beam_pipelines.conftest import ids, pipeline, variant


def test_simulated_and_fallen_back_trajectories_are_dropped_as_simulated(recorded):
    def simulated(t):
        t.environment.backend = "simulator"
        t.provenance.simulated = True

    def fell_back(t):
        t.environment.config = {**t.environment.config, "fallback": {"from_step": 1, "model": "m"}}
        t.provenance.simulated = True

    base = recorded[0]
    sim, partial = variant(base, "sim", simulated), variant(base, "partial", fell_back)
    assert rejection(sim, 512, 10**6) == ("simulated", "recorded against a world model (simulator)")
    assert rejection(partial, 512, 10**6) == ("simulated", "fell back to the simulator from step 1")
    assert rejection(base, 512, 10**6) is None
    with pipeline() as p:
        out = p | beam.Create([*recorded, sim, partial]) | FilterTrajectories()
        assert_that(ids(out[OK], "Ids"), equal_to([t.trajectory_id for t in recorded]))
        details = out[DEAD_LETTER] | "Reasons" >> beam.Map(lambda d: (d.stage, d.reason, d.trajectory_id))
        assert_that(
            details,
            equal_to([("filter", "simulated", "sim"), ("filter", "simulated", "partial")]),
            label="DeadLetters",
        )

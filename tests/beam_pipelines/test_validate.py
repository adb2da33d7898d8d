from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages.validate import ValidateTrajectories
from tests.beam_pipelines.conftest import ids, pipeline, variant


def test_invalid_trajectories_go_to_the_dead_letter_with_their_field(recorded):
    def misnumber(t):
        t.steps[2].index = 7

    def unknown_domain(t):
        t.domain = "fax"

    bad = [variant(recorded[0], "bad-index", misnumber), variant(recorded[1], "bad-domain", unknown_domain)]
    with pipeline() as p:
        out = p | beam.Create(recorded + bad) | ValidateTrajectories()
        assert_that(ids(out[OK], "Ids"), equal_to([t.trajectory_id for t in recorded]))
        dead = out[DEAD_LETTER] | "Summary" >> beam.Map(
            lambda d: (d.stage, d.reason, d.trajectory_id, d.detail.split(": ")[1])
        )
        assert_that(
            dead,
            equal_to(
                [
                    ("validate", "invalid_field", "bad-index", "steps[2].index"),
                    ("validate", "invalid_field", "bad-domain", "domain"),
                ]
            ),
            label="DeadLetters",
        )

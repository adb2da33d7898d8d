from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages.dedup import Deduplicate
from beam_pipelines.stages.park import ParkTrajectories
from tests.beam_pipelines.conftest import ids, pipeline, variant


def _parked(p, trajectories, root):
    return p | beam.Create([("train", t) for t in trajectories]) | ParkTrajectories(str(root))


def later_clock(t):
    for step in t.steps:
        step.observation.text = step.observation.text.replace("09:5", "10:0")


def one_more_line(t):
    t.steps[-1].observation.text += "\nan extra line of output"


def other_domain(t):
    t.domain = "swe"


def test_exact_and_near_duplicates_keep_the_smallest_id_per_domain(recorded, tmp_path):
    a, b, c, d, e = recorded[:5]
    inputs = [
        *recorded,
        variant(a, "0-copy", later_clock),  # sorts before a: a is the one dropped
        variant(b, "zz-copy"),
        variant(c, "zz-near", one_more_line),
        variant(d, "zz-other-domain", other_domain),  # same content, other domain: kept
        e,  # read twice
    ]
    with pipeline() as p:
        out = _parked(p, inputs, tmp_path) | Deduplicate(threshold=0.8)
        kept = [t.trajectory_id for t in recorded[1:]] + ["0-copy", "zz-other-domain"]
        assert_that(ids(out[OK], "Ids"), equal_to(kept))
        dead = out[DEAD_LETTER] | "Summary" >> beam.Map(
            lambda x: (x.reason, x.trajectory_id, x.detail.split(" (")[0])
        )
        assert_that(
            dead,
            equal_to(
                [
                    ("exact_duplicate", a.trajectory_id, "duplicate of 0-copy"),
                    ("exact_duplicate", "zz-copy", f"duplicate of {b.trajectory_id}"),
                    ("near_duplicate", "zz-near", f"duplicate of {c.trajectory_id}"),
                    ("duplicate_id", e.trajectory_id, "another record with the same trajectory_id was kept"),
                ]
            ),
            label="DeadLetters",
        )


def test_a_strict_threshold_keeps_near_duplicates(recorded, tmp_path):
    def more_output(t):
        t.steps[-1].observation.text += "".join(f"\nline {i} of new output" for i in range(6))

    inputs = [*recorded[:3], variant(recorded[2], "zz-near", more_output)]
    with pipeline() as p:
        out = _parked(p, inputs, tmp_path) | Deduplicate(threshold=1.0)
        assert_that(ids(out[OK], "Ids"), equal_to([t.trajectory_id for t in inputs]))


def test_rejects_inconsistent_parameters():
    with pytest.raises(ValueError, match="multiple of bands"):
        Deduplicate(num_perm=64, bands=10)
    with pytest.raises(ValueError, match="threshold"):
        Deduplicate(threshold=0)

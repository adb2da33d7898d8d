from __future__ import annotations

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages import dedup
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


def test_bucket_entries_cross_the_shuffle_packed_many_to_a_value():
    """FnApiRunner holds every grouped element as Python objects: the LSH shuffle gets at most one
    element per (band, bucket group) and bundle, not one per band and trajectory, and the worker
    that reads a group still finds exactly the trajectories whose band bytes are equal."""
    rng = np.random.default_rng(0)
    signatures = {f"t{i:03d}": rng.integers(0, 2**31, 64, dtype=np.uint32).tobytes() for i in range(40)}
    # band 0 of 16 is the first 4 values (16 bytes): t005 shares only that band with t001
    signatures["t005"] = signatures["t001"][:16] + signatures["t005"][16:]
    signatures["t009"] = signatures["t002"]  # every band equal
    sketches = [("terminal", item) for item in sorted(signatures.items())]

    def few(counts: list[int]) -> None:
        assert counts[0] <= 16 * 2, counts  # of 40 x 16 entries

    with pipeline() as p:
        packed = p | beam.Create(sketches) | beam.ParDo(dedup._PackBandEntries(16, groups=2))
        assert_that(packed | beam.combiners.Count.Globally(), few, label="FewElements")
        candidates = packed | beam.GroupByKey() | beam.FlatMap(dedup._candidates) | beam.Distinct()
        assert_that(candidates, equal_to([("t005", "t001"), ("t009", "t002")]), label="Candidates")

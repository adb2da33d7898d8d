from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages import dedup
from beam_pipelines.stages.dedup import DROPS, Deduplicate
from beam_pipelines.stages.park import ParkTrajectories
from beam_pipelines.stages.spill import SpillByKey
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


def _drops(out) -> beam.PCollection:
    return out[DROPS] | "Drops" >> beam.MapTuple(lambda dropped, d: (d[0], dropped, d[1]))


def test_exact_and_near_duplicates_keep_the_smallest_id_per_domain(recorded, tmp_path):
    a, b, c, d, e = recorded[:5]
    inputs = [
        *recorded,
        variant(a, "0-copy", later_clock),  # sorts before a: a is the one dropped
        variant(b, "zz-copy"),
        variant(c, "zz-near", one_more_line),
        variant(d, "zz-other-domain", other_domain),  # same content, other domain: kept
        e,  # read twice: not its own duplicate (BuildShards keeps one of its records)
    ]
    with pipeline() as p:
        out = _parked(p, inputs, tmp_path) | Deduplicate(str(tmp_path), threshold=0.8)
        assert_that(ids(out[OK], "Refs"), equal_to([t.trajectory_id for t in inputs]), label="AllRefs")
        expected = [
            ("exact_duplicate", a.trajectory_id, "0-copy"),
            ("exact_duplicate", "zz-copy", b.trajectory_id),
            ("near_duplicate", "zz-near", c.trajectory_id),
        ]
        assert_that(_drops(out), equal_to(expected), label="Drops")
        dead = out[DEAD_LETTER] | "Summary" >> beam.Map(
            lambda x: (x.reason, x.trajectory_id, x.detail.split(" (")[0])
        )
        assert_that(
            dead, equal_to([(r, i, f"duplicate of {k}") for r, i, k in expected]), label="DeadLetters"
        )


def test_a_strict_threshold_keeps_near_duplicates(recorded, tmp_path):
    def more_output(t):
        t.steps[-1].observation.text += "".join(f"\nline {i} of new output" for i in range(6))

    inputs = [*recorded[:3], variant(recorded[2], "zz-near", more_output)]
    with pipeline() as p:
        out = _parked(p, inputs, tmp_path) | Deduplicate(str(tmp_path), threshold=1.0)
        assert_that(out[DROPS], equal_to([]))


def test_rejects_inconsistent_parameters():
    with pytest.raises(ValueError, match="multiple of bands"):
        Deduplicate("out", num_perm=64, bands=10)
    with pytest.raises(ValueError, match="threshold"):
        Deduplicate("out", threshold=0)


def test_bucket_entries_cross_the_shuffle_as_a_few_locations(recorded, tmp_path):
    """FnApiRunner holds every grouped element as Python objects: the LSH shuffle gets one location
    per (band, bucket group) and flush, not one element per band and trajectory, and the verifier
    still finds the duplicates from the entries and sketches it reads back."""
    inputs = [*recorded, variant(recorded[3], "zz-copy")]

    def few(counts: list[int]) -> None:
        assert counts[0] <= 16 * 2 < 16 * len(inputs), counts

    with pipeline() as p:
        pairs = p | beam.Create([("train", t) for t in inputs]) | ParkTrajectories(str(tmp_path))
        sketches, bands = dedup.sketch_root(str(tmp_path)), dedup.band_root(str(tmp_path))
        sketched = pairs | beam.ParDo(dedup._MakeSketch(sketches, 64, 16, 1, 5, groups=2)).with_outputs(
            dedup._ENTRIES, main=OK
        )
        grouped = sketched[dedup._ENTRIES] | SpillByKey(bands)
        locations = grouped | beam.FlatMap(lambda group: group[1]) | beam.combiners.Count.Globally()
        assert_that(locations, few, label="FewLocations")
        drops = grouped | beam.ParDo(dedup._Verify(sketches, bands, 0.8, 64)) | beam.Distinct()
        expected = ("zz-copy", ("exact_duplicate", recorded[3].trajectory_id, 1.0))
        assert_that(drops, equal_to([expected]), label="Drops")

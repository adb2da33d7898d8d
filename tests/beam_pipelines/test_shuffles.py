"""What crosses a shuffle is small: ids, hashes, sketches and references, never trajectories.

FnApiRunner holds every grouped collection in memory, so anything large that reaches a GroupByKey
makes the pipeline's memory grow with the corpus. Every GroupByKey of the whole pipeline (those inside
CoGroupByKey, Reshuffle and combiners included) gets a probe on its input here.
"""

from __future__ import annotations

import pickle

import apache_beam as beam
from apache_beam.pipeline import PipelineVisitor
from apache_beam.testing.util import assert_that

from beam_pipelines.build_corpus import build
from beam_pipelines.options import parse_args
from tests.beam_pipelines.conftest import FIXTURE, pipeline

LIMIT = 2048  # bytes pickled: a reference, a signature or a dead letter fits; a trajectory does not


class _GroupInputs(PipelineVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[str, beam.PCollection]] = []

    def visit_transform(self, node) -> None:
        if isinstance(node.transform, beam.GroupByKey):
            self.found.append((node.full_label, node.inputs[0]))


def test_no_group_by_key_carries_a_trajectory(recorded, tmp_path):
    assert min(len(pickle.dumps(t)) for t in recorded) > 2 * LIMIT  # the probe can tell them apart
    config, _ = parse_args(["--input", str(FIXTURE), "--output", str(tmp_path), "--shards", "2"])
    with pipeline() as p:
        build(p, config, {})
        visitor = _GroupInputs()
        p.visit(visitor)
        assert len(visitor.found) >= 6
        sizes = [
            pcoll | f"Probe{i}" >> beam.Map(lambda e, label=label: (label, len(pickle.dumps(e))))
            for i, (label, pcoll) in enumerate(visitor.found)
        ]
        largest = sizes | beam.Flatten() | beam.CombinePerKey(max)

        def small(pairs) -> None:
            assert pairs, "no element reached a shuffle"
            too_big = sorted((size, label) for label, size in pairs if size > LIMIT)
            assert not too_big, too_big

        assert_that(largest, small)

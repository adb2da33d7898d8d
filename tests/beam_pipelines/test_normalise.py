from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.stages.normalise import NormaliseTrajectories
from tests.beam_pipelines.conftest import pipeline, variant


def test_normalises_text_and_leaves_clean_trajectories_alone(recorded):
    def make_raw(t):
        t.task.instruction = "Cre\u0301e the file\r\n"
        t.steps[0].action.text = "ls\r"
        t.steps[0].observation.text = "\x1b[32magent@sandbox\x1b[0m:~$ ls   \r\nfile.txt\t\r\n"
        t.steps[1].observation.format = "text"
        t.steps[1].observation.text = "two trailing  \nspaces"

    def expected(t):
        t.task.instruction = "Cr\u00e9e the file\n"
        t.steps[0].action.text = "ls\n"
        t.steps[0].observation.text = "agent@sandbox:~$ ls\nfile.txt\n"
        t.steps[1].observation.format = "text"
        t.steps[1].observation.text = "two trailing  \nspaces"

    raw = variant(recorded[0], "raw", make_raw)
    with pipeline() as p:
        out = p | beam.Create([*recorded, raw]) | NormaliseTrajectories()
        assert_that(out, equal_to([*recorded, variant(recorded[0], "raw", expected)]))

from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages.filter import FilterTrajectories, is_error_observation
from schemas import Observation
from tests.beam_pipelines.conftest import ids, pipeline, reasons, variant


def test_error_observations():
    assert is_error_observation(Observation(format="error", text="sandbox crashed"))
    assert is_error_observation(Observation(format="terminal_screen", text="$", data={"exit_code": 2}))
    assert is_error_observation(Observation(format="terminal_screen", text="$", data={"timed_out": True}))
    assert not is_error_observation(Observation(format="terminal_screen", text="$", data={"exit_code": 0}))
    assert not is_error_observation(Observation(format="terminal_screen", text="$", data={"exit_code": None}))


def test_drops_short_oversize_and_all_error_trajectories_with_reasons(recorded):
    def no_steps(t):
        t.steps = []

    def one_step(t):
        t.steps = t.steps[:1]

    def huge(t):
        t.steps[-1].observation.text += "x" * 50_000

    def all_failing(t):
        for step in t.steps:
            step.observation.data["exit_code"] = 1

    base = recorded[0]
    bad = [
        variant(base, "empty", no_steps),
        variant(base, "single", one_step),
        variant(base, "huge", huge),
        variant(base, "failing", all_failing),
    ]
    with pipeline() as p:
        out = p | beam.Create(recorded + bad) | FilterTrajectories(max_steps=64, max_chars=40_000)
        assert_that(ids(out[OK], "Ids"), equal_to([t.trajectory_id for t in recorded]))
        assert_that(
            reasons(out[DEAD_LETTER], "Reasons"),
            equal_to(
                [
                    ("too_short", "empty"),
                    ("too_short", "single"),
                    ("oversize", "huge"),
                    ("all_errors", "failing"),
                ]
            ),
            label="DeadLetters",
        )

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages.split import SplitTrajectories, split_of
from tests.beam_pipelines.conftest import pipeline, reasons, variant, write_dataset


def test_split_of_is_stable_and_follows_the_ratios():
    ratios = (0.8, 0.1, 0.1)
    counts = Counter(split_of(f"task-{i}", ratios, "v1") for i in range(20_000))
    assert abs(counts["train"] / 20_000 - 0.8) < 0.02 and abs(counts["test"] / 20_000 - 0.1) < 0.02
    assert [split_of(f"task-{i}", ratios, "v1") for i in range(50)] == [
        split_of(f"task-{i}", ratios, "v1") for i in range(50)
    ]
    assert [split_of(f"task-{i}", ratios, "v1") for i in range(50)] != [
        split_of(f"task-{i}", ratios, "v2") for i in range(50)
    ]


def test_every_trajectory_of_a_task_lands_in_one_split(recorded):
    repeats = [variant(t, f"{t.trajectory_id}-again") for t in recorded]
    with pipeline() as p:
        out = p | beam.Create(recorded + repeats) | SplitTrajectories(ratios=(0.4, 0.3, 0.3))
        per_task = (
            out[OK]
            | "TaskSplit" >> beam.Map(lambda pair: (pair[1].task.id, pair[0]))
            | "Distinct" >> beam.Distinct()
            | "Tasks" >> beam.Keys()
        )
        assert_that(per_task, equal_to([t.task.id for t in recorded]))


def _eval_file(path: Path, observation: str) -> Path:
    sample = {
        "task": "terminal",
        "id": "terminal_test_1",
        "prompt": ["### Turn 1\n**Action:**\nls"],
        "response": [f"**Environment Observation:**\n{observation}\n"],
        "current_prompt": "### Turn 2\n**Action:**\npwd",
        "system_str": "You simulate a terminal.",
        "turn_idx": 2,
        "total_turns": 2,
    }
    path.write_text(json.dumps(sample) + "\n")
    return path


@pytest.mark.parametrize("kind", ["jsonl", "dataset"])
def test_training_trajectories_seen_in_the_eval_set_are_dropped(tmp_path: Path, recorded, kind: str):
    leaked = recorded[3]
    if kind == "jsonl":
        eval_path = _eval_file(tmp_path / "terminal_test.jsonl", leaked.steps[2].observation.text)
    else:
        eval_path = write_dataset(tmp_path / "eval", [leaked])
    with pipeline() as p:
        out = (
            p
            | beam.Create(recorded)
            | SplitTrajectories(ratios=(1.0, 0.0, 0.0), decontaminate_against=str(eval_path))
        )
        kept = out[OK] | "Ids" >> beam.Map(lambda pair: (pair[0], pair[1].trajectory_id))
        assert_that(kept, equal_to([("train", t.trajectory_id) for t in recorded if t is not leaked]))
        assert_that(
            reasons(out[DEAD_LETTER], "Reasons"),
            equal_to([("contaminated", leaked.trajectory_id)]),
            label="DeadLetters",
        )


def test_only_training_trajectories_are_decontaminated(tmp_path: Path, recorded):
    eval_path = _eval_file(tmp_path / "terminal_test.jsonl", recorded[3].steps[2].observation.text)
    with pipeline() as p:
        out = (
            p
            | beam.Create(recorded)
            | SplitTrajectories(ratios=(0.0, 0.0, 1.0), decontaminate_against=str(eval_path))
        )
        assert_that(out[OK] | "Splits" >> beam.Keys(), equal_to(["test"] * len(recorded)))
        assert_that(out[DEAD_LETTER], equal_to([]), label="NoDeadLetters")


def test_rejects_bad_ratios():
    with pytest.raises(ValueError, match="summing to 1"):
        SplitTrajectories(ratios=(0.5, 0.2, 0.2))

"""Stage 3: normalise text without changing its meaning (see `beam_pipelines.text.normalise_text`).

Volatile values (timestamps, PIDs) are kept: the model must learn to produce them. Only the dedup
stage sees them masked, through `dedup_key_text`.
"""

from __future__ import annotations

from dataclasses import replace

import apache_beam as beam

from beam_pipelines.dead_letter import count
from beam_pipelines.text import is_screen, normalise_text
from schemas import Observation, Step, Trajectory

STAGE = "normalise"


def _observation(observation: Observation) -> Observation:
    text = normalise_text(observation.text, screen=is_screen(observation.format))
    return observation if text == observation.text else replace(observation, text=text)


def _step(step: Step) -> Step:
    action_text = normalise_text(step.action.text)
    observation = _observation(step.observation)
    if action_text == step.action.text and observation is step.observation:
        return step
    return replace(step, action=replace(step.action, text=action_text), observation=observation)


def normalise_trajectory(t: Trajectory) -> Trajectory:
    """A trajectory with normalised texts. Unchanged parts are shared, not copied, and the input
    is never mutated (Beam may hand the same object to several consumers)."""
    instruction = normalise_text(t.task.instruction)
    initial = _observation(t.initial_observation)
    steps = [_step(step) for step in t.steps]
    outcome = t.outcome
    found = outcome.verification
    if found is not None and found.turns:  # verification turns are SFT samples too
        turns = [_step(turn) for turn in found.turns]
        if not all(new is old for new, old in zip(turns, found.turns, strict=True)):
            outcome = replace(outcome, verification=replace(found, turns=turns))
    changed = (
        instruction != t.task.instruction or initial is not t.initial_observation or outcome is not t.outcome
    )
    if not changed and all(new is old for new, old in zip(steps, t.steps, strict=True)):
        count(STAGE, "unchanged")
        return t
    count(STAGE, "changed")
    task = t.task if instruction == t.task.instruction else replace(t.task, instruction=instruction)
    return replace(t, task=task, initial_observation=initial, steps=steps, outcome=outcome)


class NormaliseTrajectories(beam.PTransform):
    """Trajectory -> Trajectory with NFC text, LF line endings, no terminal control sequences and,
    on rendered screens, no trailing blanks."""

    def expand(self, trajectories: beam.PCollection) -> beam.PCollection:
        return trajectories | "Normalise" >> beam.Map(normalise_trajectory)

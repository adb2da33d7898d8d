"""Closed loop: the simulator runs a real trajectory's actions on its OWN predictions.

Turn k's prompt is rendered by the same renderer as teacher forcing, from the real initial state, the
real actions and the model's predictions for turns 1..k-1, exactly the history a SimulatedSandbox
holds (for a delta-target model, its rebuilt full observations); so the divergence by turn index shows
how errors compound. Trajectories run concurrently;
the turns of one trajectory run in order because each needs the previous prediction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from schemas.records import Observation, Trajectory
from schemas.render import chat_messages
from training.backends.base import WorldModelBackend
from training.fidelity.noise_floor import NoiseFloor
from training.fidelity.teacher_forced import EvalSettings, answer_row, fits_chars, predict, run_concurrently
from training.targets import model_target


def _with_predictions(t: Trajectory, predicted: list[str]) -> Trajectory:
    """`t` with the first len(predicted) observations replaced by the model's."""
    steps = [
        dataclasses.replace(s, observation=Observation(format=s.observation.format, text=text))
        for s, text in zip(t.steps, predicted, strict=False)
    ]
    return dataclasses.replace(t, steps=steps + t.steps[len(predicted) :])


def closed_loop(
    backend: WorldModelBackend,
    trajectories: Sequence[Trajectory],
    floor: NoiseFloor,
    settings: EvalSettings,
    system: str = "model",
) -> list[dict]:
    fits = fits_chars(settings.context_chars)
    target = settings.target or model_target(backend)

    def one(t: Trajectory) -> list[dict]:
        predicted: list[str] = []
        rows = []
        for k in range(1, len(t.steps[: settings.max_turns]) + 1):
            messages = chat_messages(_with_predictions(t, predicted), k, fits=fits)
            # an edit script edits the model's own last observation, as in a simulator
            previous = predicted[-1] if predicted else t.initial_observation.text
            answer = predict(backend, messages, settings.config, previous, t.domain, target)
            rows.append(answer_row(system, "closed_loop", t, k, answer, floor))
            # The history holds what the evaluator read, as a simulator would show it (empty on errors).
            predicted.append(answer.prediction.content)
        return rows

    per_trajectory = run_concurrently(
        one, [(t,) for t in trajectories], settings, f"{system} closed loop", unit="trajectory"
    )
    return [row for rows in per_trajectory for row in rows]

"""Stage 4: redact secrets and personal data in every text that leaves the corpus.

Own patterns (private key blocks, AWS access key ids, GitHub tokens, e-mail and non-loopback IP
addresses) plus detect-secrets' plugins with their default settings on lines that pass a cheap
prefilter (see `beam_pipelines.text.Redactor`). Each distinct value becomes a stable placeholder
`<REDACTED:kind:n>` within its trajectory; counts per kind go to Beam counters `redact/<kind>`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import apache_beam as beam

from beam_pipelines.dead_letter import count
from beam_pipelines.text import Redactor, SecretFinder, kind_slug
from schemas import Observation, Step, Trajectory

STAGE = "redact"
Redact = Callable[[str], str]
# Covered by our own patterns, which catch more: the whole key block rather than its first line,
# every non-loopback address rather than public IPv4 only, and the token rather than its prefix.
_OWN_KINDS = frozenset({"Private Key", "Public IP (ipv4)", "GitHub Token"})
# A file name whose extension selects detect-secrets' generic (not language-specific) rules.
_SCAN_NAME = "observation.txt"


class _Redact(beam.DoFn):
    def setup(self) -> None:
        # Imported on the worker: plugin discovery is slow and holds module state we do not ship.
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.settings import get_settings

        # Verification would call the providers' APIs; a corpus job must never send secrets out.
        get_settings().disable_filters(
            "detect_secrets.filters.common.is_ignored_due_to_verification_policies"
        )
        mapping = get_mapping_from_secret_type_to_class()
        self._plugins = [cls() for kind, cls in sorted(mapping.items()) if kind not in _OWN_KINDS]
        self._finder = SecretFinder(self._detect)

    def _detect(self, line: str) -> Iterator[tuple[str, str]]:
        for plugin in self._plugins:
            for secret in plugin.analyze_line(filename=_SCAN_NAME, line=line):
                if secret.secret_value:
                    yield kind_slug(secret.type), secret.secret_value

    def process(self, t: Trajectory) -> Iterator[Trajectory]:
        redactor = Redactor(self._finder)
        redacted = redact_trajectory(t, redactor.redact)
        for kind, n in redactor.counts.items():
            count(STAGE, kind, n)
        count(STAGE, "trajectories_redacted" if redactor.counts else "trajectories_clean")
        yield redacted


def _json(value: Any, redact: Redact) -> Any:
    """`value` with strings redacted; the same object when nothing changed."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        items = {key: _json(item, redact) for key, item in value.items()}
        return value if all(items[key] is item for key, item in value.items()) else items
    if isinstance(value, list):
        redacted = [_json(item, redact) for item in value]
        return value if all(new is old for new, old in zip(redacted, value, strict=True)) else redacted
    return value


def _observation(observation: Observation, redact: Redact) -> Observation:
    text, data = redact(observation.text), _json(observation.data, redact)
    if text is observation.text and data is observation.data:
        return observation
    return replace(observation, text=text, data=data)


def _step(step: Step, redact: Redact) -> Step:
    text, arguments = redact(step.action.text), _json(step.action.arguments, redact)
    observation = _observation(step.observation, redact)
    if text is step.action.text and arguments is step.action.arguments and observation is step.observation:
        return step
    action = replace(step.action, text=text, arguments=arguments)
    return replace(step, action=action, observation=observation)


def redact_trajectory(t: Trajectory, redact: Redact) -> Trajectory:
    """`t` with `redact` applied to every text a corpus carries, in a fixed order (so placeholder
    numbers are deterministic): task, initial observation, steps, outcome error. `redact` returns
    its input object when it finds nothing; unchanged parts are then shared, not copied, and the
    input is never mutated (Beam may hand one object to several consumers)."""
    instruction, setup = redact(t.task.instruction), _json(t.task.setup, redact)
    initial = _observation(t.initial_observation, redact)
    steps = [_step(step, redact) for step in t.steps]
    error = redact(t.outcome.error)
    task = t.task
    if instruction is not t.task.instruction or setup is not t.task.setup:
        task = replace(t.task, instruction=instruction, setup=setup)
    outcome = t.outcome if error is t.outcome.error else replace(t.outcome, error=error)
    if (
        task is t.task
        and initial is t.initial_observation
        and outcome is t.outcome
        and all(new is old for new, old in zip(steps, t.steps, strict=True))
    ):
        return t
    return replace(t, task=task, initial_observation=initial, steps=steps, outcome=outcome)


class RedactSecrets(beam.PTransform):
    """Trajectory -> Trajectory with secrets and personal data replaced by `<REDACTED:kind:n>`."""

    def expand(self, trajectories: beam.PCollection) -> beam.PCollection:
        return trajectories | "Redact" >> beam.ParDo(_Redact())

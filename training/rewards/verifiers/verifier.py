"""`verify`: every rule check of one reply, in order, into one binary verdict."""

from __future__ import annotations

from training.observations.template import Template
from training.rewards.verifiers.commentary import commentary_failures
from training.rewards.verifiers.deterministic import deterministic_failures
from training.rewards.verifiers.extraction import extract_strict
from training.rewards.verifiers.formats import format_failures
from training.rewards.verifiers.verdict import Verdict


def verify(domain: str, reply: str, reference: str, template: Template | None = None) -> Verdict:
    """The verdict on a model's raw `reply` for one turn of `domain`, whose real observation is
    `reference`; `template` is that turn's noise-floor template where one was measured.

    Every check runs that can, so a failed verdict lists all that is wrong: the content checks run on
    the reply's last closed block even when extraction failed, and are skipped without one.
    """
    content, failures = extract_strict(reply)
    if content is not None:
        failures += format_failures(domain, content, reference)
        failures += deterministic_failures(content, reference, template)
        failures += commentary_failures(content, reference)
    return Verdict(tuple(failures), content)

"""Deterministic content agrees with the real observation.

With a noise floor (a `Template` measured against other real runs of the same actions), every stable
span must be reproduced exactly, and each volatile span (a time, a PID, a temp name some real run
changed) may hold text only up to its bound: the metric `stable_exact` (training/observations/template.py).

Without one, nothing says which parts are volatile, and demanding the whole text would refuse a
prediction for a clock that ticked. The conservative rule: every non-blank line of the real observation
must appear in the prediction (as many times, trailing spaces ignored) once each word that holds a digit
is masked, since times, PIDs, ids, sizes and ports all do. Extra lines and the order of lines are not
judged by it, nor are random names made of letters only: the rule only refuses content that a real
run's deterministic lines show to be wrong or missing.
"""

from __future__ import annotations

import re
from collections import Counter

from training.observations.template import Template, match_volatile
from training.rewards.verifiers.verdict import Failure

# A word holding a digit: 09:51:07 gives three, 2026-12-02T07 one, 3f2a1b9c one, pid 4711 one.
_NUMBERED_WORD = re.compile(r"[\w.-]*\d[\w.-]*")

CHECKS = {
    "deterministic.stable_spans": "the noise floor's stable spans are not all reproduced exactly",
    "deterministic.lines": "no noise floor: a real line (digits masked) is missing from the prediction",
}


def masked_lines(text: str) -> Counter[str]:
    """The text's non-blank lines, trailing spaces dropped, each word holding a digit replaced by `#`."""
    return Counter(_NUMBERED_WORD.sub("#", line.rstrip()) for line in text.split("\n") if line.strip())


def deterministic_failures(content: str, reference: str, template: Template | None) -> list[Failure]:
    if template is not None and template.measured:
        if match_volatile(template, content) is not None:
            return []
        return [Failure("deterministic.stable_spans", _first_difference(template.text, content))]
    missing = masked_lines(reference) - masked_lines(content)
    if not missing:
        return []
    first = next(iter(missing))
    count = sum(missing.values())
    return [Failure("deterministic.lines", f"{count} real line(s) missing, first {first.strip()[:50]!r}")]


def _first_difference(real: str, predicted: str) -> str:
    """Where a prediction first departs from the real text, for the log (volatile spans may be the
    cause when they come first; the check itself is the template match)."""
    real_lines, predicted_lines = real.split("\n"), predicted.split("\n")
    for number, (a, b) in enumerate(zip(real_lines, predicted_lines, strict=False), start=1):
        if a != b:
            return f"line {number} differs from the real {a.strip()[:40]!r}"
    return f"{len(predicted_lines)} lines where the real observation has {len(real_lines)}"

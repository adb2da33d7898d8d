"""A real observation cut into stable and volatile spans (made by training/fidelity/noise_floor.py),
and the matching of a prediction against it.

Stable spans are what every real run of the turn showed: a prediction must reproduce them exactly.
Volatile spans (timestamps, PIDs, temp names seen to differ between real runs) may hold any text up to
a bound (`Span.max_chars`). Shared by the fidelity metrics (training/fidelity/metrics.py:
`stable_exact`, `volatile_form`) and the rule verifiers (training/rewards/verifiers: the
deterministic-content check), so both read a template the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from training.observations.shapes import shape_pattern


@dataclass
class Span:
    text: str  # the recorded real text
    volatile: bool = False
    variants: list[str] = field(default_factory=list)  # the other real runs' text for this span

    def max_chars(self) -> int:
        """The most a prediction may put in this span: twice the longest real value, plus a little. A span
        is volatile because real runs differed there, not licence to hold any text: unbounded, one
        inserted line would let a prediction hide whole screens of invented output in it."""
        return 2 * max(len(v) for v in [self.text, *self.variants]) + 8

    def form(self) -> str:
        """One alternative per distinct real form, so a prediction needs the form of some real run."""
        shapes = sorted({shape_pattern(v) for v in [self.text, *self.variants]})
        return "(?:" + "|".join(shapes) + ")"


@dataclass
class Template:
    spans: list[Span]
    # The other real runs' whole texts the spans were found with (empty without a noise floor): the
    # structured metrics find volatile values in them (JSON values, output lines).
    others: list[str] = field(default_factory=list)

    @classmethod
    def stable(cls, text: str) -> Template:
        return cls([Span(text)])

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.spans)

    @property
    def measured(self) -> bool:
        """Whether other real runs were seen (a noise floor), so its stable spans are known to be stable."""
        return bool(self.others)

    @property
    def volatile_spans(self) -> list[Span]:
        return [s for s in self.spans if s.volatile]

    @property
    def volatile_share(self) -> float:
        """Share of the real text's characters inside volatile spans (0 for an empty text)."""
        total = len(self.text)
        return sum(len(s.text) for s in self.volatile_spans) / total if total else 0.0


def match_volatile(template: Template, prediction: str) -> list[str] | None:
    """The prediction's text in each volatile span when its stable spans all match, else None."""
    spans = template.spans
    if not template.volatile_spans:
        return [] if prediction == template.text else None
    multiline = any("\n" in s.text or any("\n" in v for v in s.variants) for s in spans if s.volatile)
    if not multiline:
        # Stable text holds every newline, so lines correspond one to one: matching line by line keeps
        # each regex small and its backtracking bounded by one line.
        return _match_by_line(spans, prediction)
    pattern = "".join(f"(.{{0,{s.max_chars()}}}?)" if s.volatile else re.escape(s.text) for s in spans)
    found = re.fullmatch(pattern, prediction, re.DOTALL)
    return list(found.groups()) if found else None


def _match_by_line(spans: Sequence[Span], prediction: str) -> list[str] | None:
    lines: list[list[Span]] = [[]]
    for span in spans:
        if span.volatile:
            lines[-1].append(span)
            continue
        parts = span.text.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if part:
                lines[-1].append(Span(part))
    predicted = prediction.split("\n")
    if len(predicted) != len(lines):
        return None
    captured: list[str] = []
    for line_spans, text in zip(lines, predicted, strict=True):
        pattern = "".join(
            f"([^\n]{{0,{s.max_chars()}}}?)" if s.volatile else re.escape(s.text) for s in line_spans
        )
        found = re.fullmatch(pattern, text)
        if found is None:
            return None
        captured.extend(found.groups())
    return captured

"""What a verifier answers: pass or fail, and every check that failed with a short reason."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Failure:
    check: str  # a name from CHECKS (training/rewards/verifiers/__init__.py), e.g. "extraction.unclosed"
    reason: str  # one short line a training log can show

    def __str__(self) -> str:
        return f"{self.check}: {self.reason}"


@dataclass(frozen=True)
class Verdict:
    """Binary by design (an RL reward's anchor): `ok` exactly when no check failed."""

    failures: tuple[Failure, ...] = field(default_factory=tuple)
    # The observation read from the reply's one block; None when the reply held no closed block.
    content: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failed_checks(self) -> list[str]:
        return [f.check for f in self.failures]

    def as_dict(self) -> dict:
        return {"ok": self.ok, "failures": [{"check": f.check, "reason": f.reason} for f in self.failures]}

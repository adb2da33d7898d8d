"""The search domain's verifier: the agent's last `answer` against the task's known answers.

    {"kind": "answer", "accepted": ["python -m venv", "python3 -m venv"], "regex": "..."}

An answer is normalised (Unicode NFKC, case folded, punctuation read as a space, runs of space
collapsed) and matches when it contains one accepted alias, normalised the same way, as whole
words: `Use python -m venv .venv` names `python -m venv`, `ls -l` does not name `ls -t`. `regex`
(optional, searched case-insensitively in the raw answer) covers answers whose form varies more
than aliases can list, or that must name several facts at once (lookaheads). Reward 1 on a match,
0 otherwise; no answer at all is 0.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS, VerifierError
from sandboxes.search.actions import ANSWER
from schemas.records import Step, Verification

KIND = "answer"
_PUNCTUATION = re.compile(r"[^\w\s]|_")


def normalise(text: str) -> str:
    """Case, width, punctuation and spacing differences removed: `Path.rglob()` -> `path rglob`."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_PUNCTUATION.sub(" ", folded).split())


def last_answer(steps: list[Step]) -> str | None:
    """The text of the episode's last `answer` action, or None when it gave none."""
    for step in reversed(steps):
        if step.action.kind == ANSWER and isinstance(step.action.arguments.get("text"), str):
            return step.action.arguments["text"]
    return None


def _params(verifier: dict[str, Any]) -> tuple[list[str], re.Pattern[str] | None]:
    accepted = verifier.get("accepted", [])
    if not isinstance(accepted, list) or not all(isinstance(a, str) and normalise(a) for a in accepted):
        raise VerifierError("an answer verifier's 'accepted' must be a list of non-empty strings")
    pattern = verifier.get("regex")
    if pattern is not None and not isinstance(pattern, str):
        raise VerifierError("an answer verifier's 'regex' must be a string")
    if not accepted and not pattern:
        raise VerifierError("an answer verifier needs 'accepted' answers or a 'regex'")
    try:
        return accepted, re.compile(pattern, re.IGNORECASE) if pattern else None
    except re.error as exc:
        raise VerifierError(f"an answer verifier's regex {pattern!r} does not compile: {exc}") from exc


def verify_answer(verifier: dict[str, Any], steps: list[Step]) -> Verification:
    accepted, pattern = _params(verifier)
    answer = last_answer(steps)
    if answer is None:
        return Verification(verifier=KIND, reward=0.0, output="no answer was given", details={"answer": None})
    said = f" {normalise(answer)} "
    matched = next((a for a in accepted if f" {normalise(a)} " in said), None)
    if matched is None and pattern is not None and pattern.search(answer):
        matched = f"regex {pattern.pattern}"
    output = f"answer {answer!r} " + (f"matches {matched!r}" if matched else "matches no accepted answer")
    details = {"answer": answer, "matched": matched, "accepted": accepted}
    reward = 1.0 if matched else 0.0
    return Verification(verifier=KIND, reward=reward, output=output[-VERIFIER_OUTPUT_CHARS:], details=details)

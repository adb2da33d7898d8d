"""No commentary about the simulation and no self-evaluation inside the observation block.

A real environment never talks about being simulated, never addresses the reader about its own output
and never grades itself, so such a phrase comes from the model. But an observation shows files, pages
and program output that people wrote, and people write "(Note: ...)" and "I'm not sure" in source code
and documentation: a matched phrase is commentary only when its line is not a line of the real
observation. The list holds phrases of three kinds, matched case-insensitively, and is kept narrow:
words a real page may well contain ("simulation", "note", "score") count only in the forms that speak
about the observation itself. Every real observation the tests hold passes it.

- `commentary.simulation`: the text calls itself simulated or predicted, or speaks as the model:
  "as a simulated environment", "this is a simulation", "simulated output", "predicted observation",
  "as an AI", "as a world model", "I predict", "I would expect", "my prediction";
- `commentary.aside`: a note to the reader in brackets, or content left out on purpose: "(note: ...)",
  "[Note: ...]", "(simulated)", "(for brevity)", "(output omitted)", "(rest of the output ...)", "...
  truncated for brevity";
- `commentary.self_evaluation`: the model grades its answer: a line starting "Score:", "Confidence:",
  "Self-evaluation:", "Rating: 4/5"; "I am confident"; "this prediction is accurate".
"""

from __future__ import annotations

import re

from training.rewards.verifiers.verdict import Failure

_FLAGS = re.IGNORECASE | re.MULTILINE
_PATTERNS: dict[str, list[re.Pattern[str]]] = {
    "commentary.simulation": [
        re.compile(r"\bas an? (?:simulated|simulation|hypothetical|world model|ai\b|language model)", _FLAGS),
        re.compile(
            r"\b(?:this|it) is (?:only |just )?(?:a |an )?(?:simulat\w*|hypothetical|predict\w*)", _FLAGS
        ),
        re.compile(
            r"\b(?:simulated|predicted|hypothetical|fictional) (?:environment|observation|output|response|"
            r"result|screen|terminal|page|tree|state)s?\b",
            _FLAGS,
        ),
        re.compile(r"\bI(?:'d| would| will)? (?:predict|simulate|expect|assume|imagine)\b", _FLAGS),
        re.compile(r"\b(?:my|this) (?:prediction|simulation)\b", _FLAGS),
    ],
    "commentary.aside": [
        re.compile(r"[(\[]\s*(?:note|nb|n\.b\.|simulated|hypothetical|placeholder)\b", _FLAGS),
        re.compile(r"\bfor brevity\b", _FLAGS),
        re.compile(r"[(\[]\s*(?:output|content|remaining \w+)\s+(?:omitted|elided)", _FLAGS),
        re.compile(r"[(\[]\s*(?:the )?rest of (?:the )?(?:output|file|page|tree|results)\b", _FLAGS),
    ],
    "commentary.self_evaluation": [
        re.compile(r"^\s*(?:score|confidence|self[- ]?evaluation|self[- ]?assessment)\s*:", _FLAGS),
        re.compile(r"^\s*rating\s*:\s*\d+(?:\.\d+)?\s*/\s*\d+", _FLAGS),
        re.compile(r"\bI(?:'m| am) (?:\w+ )?(?:confident|certain|unsure|not sure)\b", _FLAGS),
        re.compile(
            r"\b(?:this|the|my) (?:prediction|observation|output|simulation) (?:is|seems|looks) (?:\w+ )?"
            r"(?:accurate|correct|faithful|plausible|realistic)\b",
            _FLAGS,
        ),
    ],
}

CHECKS = {
    "commentary.simulation": "the observation speaks about being simulated or predicted, or as the model",
    "commentary.aside": "a bracketed note to the reader, or content left out on purpose",
    "commentary.self_evaluation": "the model grades its own answer (a score, its confidence)",
}


def commentary_failures(content: str, reference: str) -> list[Failure]:
    """One failure per kind of commentary in `content` that the real `reference` does not show."""
    real_lines = {line.strip() for line in reference.split("\n")}
    failures = []
    for check, patterns in _PATTERNS.items():
        found = next(
            (
                match
                for pattern in patterns
                for match in pattern.finditer(content)
                if _line_of(content, match.start()).strip() not in real_lines
            ),
            None,
        )
        if found:
            failures.append(Failure(check, f"{found.group().strip()!r} is no environment's output"))
    return failures


def _line_of(text: str, at: int) -> str:
    end = text.find("\n", at)
    return text[text.rfind("\n", 0, at) + 1 : end if end >= 0 else len(text)]

"""An LLM judge over any world-model backend (usually an OpenAI-compatible endpoint) scoring a predicted
observation against the real one on AgentWorldBench's five dimensions, 1 to 5 each.

Shared by the fidelity report and `python -m training.agentworldbench judge`. A reply the parser
cannot read is a recorded judge failure, never an exception: small judges often ramble.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

from training.backends.base import GenerationConfig, WorldModelBackend

DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality")

JUDGE_SYSTEM = """You grade a world model: a model that predicts what an agent's environment (a terminal, \
a repository, a search engine, a tool server, a web page, a desktop, a phone) shows after an action. \
You see the action, the environment's previous observation, the REAL observation that came back, and \
the PREDICTED one. Grade the prediction on five dimensions, each an integer from 1 (worst) to 5 (best):

- format: the prediction has the shape of this environment's observations (a terminal screen ending \
in a prompt when the command finished, valid JSON for a JSON tool result, a well-nested tree).
- factuality: deterministic content (command output that follows from the action and the state, \
file contents, error messages) matches the real observation.
- consistency: the prediction agrees with the previous observation and the action (same directory, \
same files, the action's effect applied once, nothing from nowhere).
- realism: content the prediction cannot know exactly is plausible: pre-existing environment content \
may differ if it is believable, and runtime values (process ids, timestamps, temporary names, sizes) \
only need a valid form.
- quality: overall, how well the prediction could stand in for the real observation.

Answer with one JSON object and nothing else, for example:
{"format": 4, "factuality": 3, "consistency": 5, "realism": 4, "quality": 3}"""

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL)
_OBJECT_RE = re.compile(r"\{[^{}]*\}")


@dataclass
class JudgeResult:
    scores: dict[str, int] | None  # all five dimensions, or None when the reply could not be read
    raw: str = ""
    error: str = ""
    percent: dict[str, float] = field(default_factory=dict)  # (x - 1) / 4 * 100 per dimension

    def as_dict(self) -> dict:
        return asdict(self)


def to_percent(score: float) -> float:
    """AgentWorldBench's reporting scale: 1 -> 0, 5 -> 100."""
    return (score - 1) / 4 * 100


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters cut ...]\n{text[-half:]}"


def judge_messages(
    domain: str, action: str, previous: str, reference: str, prediction: str, *, max_chars: int = 4000
) -> list[dict]:
    """The judge's chat; each text is cut to `max_chars` (head and tail kept) to fit small contexts."""
    user = (
        f"## Environment\n{domain}\n\n## Action\n{_clip(action, max_chars)}\n\n"
        f"## Previous observation\n{_clip(previous, max_chars)}\n\n"
        f"## Real observation\n{_clip(reference, max_chars)}\n\n"
        f"## Predicted observation\n{_clip(prediction, max_chars)}\n\n"
        "Grade the predicted observation. Reply with the JSON object only."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def _score(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and float(value).is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        return None
    return number if 1 <= number <= 5 else None


def parse_judge_reply(reply: str) -> tuple[dict[str, int] | None, str]:
    """The five scores from a judge's reply, or None and why not. Reads the last JSON object that has
    all five, else `name: n` pairs anywhere in the text."""
    visible = _THINK_RE.sub("", reply)
    for candidate in reversed(_OBJECT_RE.findall(visible)):
        try:
            obj = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(obj, dict):
            lowered = {str(k).strip().lower(): v for k, v in obj.items()}
            scores = {d: _score(lowered.get(d)) for d in DIMENSIONS}
            if all(v is not None for v in scores.values()):
                return scores, ""  # type: ignore[return-value]
    found: dict[str, int] = {}
    for dim in DIMENSIONS:
        match = re.search(rf"\b{dim}\b\W{{0,4}}([1-5])\b", visible, re.IGNORECASE)
        if match:
            found[dim] = int(match.group(1))
    if len(found) == len(DIMENSIONS):
        return found, ""
    missing = [d for d in DIMENSIONS if d not in found]
    return None, f"no score 1-5 for {', '.join(missing)} in the judge's reply"


JUDGE_CONFIG = GenerationConfig(max_new_tokens=256, temperature=0.0)


def judge(
    backend: WorldModelBackend,
    *,
    domain: str,
    action: str,
    previous: str,
    reference: str,
    prediction: str | None,
    config: GenerationConfig = JUDGE_CONFIG,
    max_chars: int = 4000,
) -> JudgeResult:
    """Score one prediction. A missing prediction, an unreadable reply or a failed request is a
    JudgeResult with `scores=None` and the reason in `error`."""
    if prediction is None:
        return JudgeResult(None, error="no predicted observation to judge (format failure)")
    messages = judge_messages(domain, action, previous, reference, prediction, max_chars=max_chars)
    try:
        reply = backend.complete(messages, config)
    except Exception as exc:  # the endpoint's failure is this sample's judge failure, not the run's
        return JudgeResult(None, error=f"judge request failed: {type(exc).__name__}: {exc}")
    scores, error = parse_judge_reply(reply)
    percent = {d: to_percent(v) for d, v in scores.items()} if scores else {}
    return JudgeResult(scores, raw=reply, error=error, percent=percent)

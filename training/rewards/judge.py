"""An LLM judge over any world-model backend (usually an OpenAI-compatible endpoint) scoring a predicted
observation against the real one on AgentWorldBench's five dimensions, 1 to 5 each.

Shared by the fidelity report and `python -m training.agentworldbench judge`. A reply the parser
cannot read is a recorded judge failure, never an exception: small judges often ramble.

The judge's context is the world model's own prompt: the chat messages it was sent
(`schemas.render.record_messages(record)` or `chat_messages(trajectory, k)`). The system message holds the
initial state, the earlier turns are indexed by `turn_idx` exactly as the model's are, and the last user
message is the action. So the judge sees what the model saw and nothing after it, without scraping the
rendered prompt or repeating the indexing rule.

With `prompts_dir` (the public Qwen-AgentWorld repository's `prompts/` folder), the request, the reading
of the reply and the sampling follow the public evaluation instead (public_judge.py), so scores
are comparable with published AgentWorldBench numbers.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from schemas.render import split_chat, strip_think
from training.backends.base import GenerationConfig, WorldModelBackend
from training.rewards import public_judge
from training.rewards.public_judge import DIMENSIONS, clip

PROJECT_PROMPT = "project"  # JudgeResult.prompt of our own judge prompt
RETRY_PAUSE_S = 2.0
ATTEMPTS = 3  # per judged sample, our prompt's; the public protocol has its own (public_judge.ATTEMPTS)
MAX_CHARS = (
    4000  # our prompt cuts each text to this by default, for small judges; the public one cuts nothing
)

JUDGE_SYSTEM = """You grade a world model: a model that predicts what an agent's environment (a terminal, \
a repository, a search engine, a tool server, a web page, a desktop, a phone) shows after an action. \
You see what the world model was shown (its instructions with the environment's initial state, the \
earlier turns, the agent's action), the REAL observation that came back, and the PREDICTED one. \
Grade the prediction on five dimensions, each an integer from 1 (worst) to 5 (best):

- format: the prediction has the shape of this environment's observations (a terminal screen ending \
in a prompt when the command finished, valid JSON for a JSON tool result, a well-nested tree).
- factuality: deterministic content (command output that follows from the action and the state, \
file contents, error messages) matches the real observation.
- consistency: the prediction agrees with the initial state, the earlier turns and the action \
(same directory, same files, the action's effect applied once, nothing from nowhere).
- realism: content the prediction cannot know exactly is plausible: pre-existing environment content \
may differ if it is believable, and runtime values (process ids, timestamps, temporary names, sizes) \
only need a valid form.
- quality: overall, how well the prediction could stand in for the real observation.

Answer with one JSON object and nothing else, for example:
{"format": 4, "factuality": 3, "consistency": 5, "realism": 4, "quality": 3}"""

_OBJECT_RE = re.compile(r"\{[^{}]*\}")


@dataclass
class JudgeResult:
    # All five dimensions, or None when the reply could not be read. The public protocol gives 0 to a
    # dimension the judge left without a usable value, and such a dimension has no `percent`.
    scores: dict[str, int] | None
    raw: str = ""
    error: str = ""
    percent: dict[str, float] = field(default_factory=dict)  # (x - 1) / 4 * 100 per scored dimension
    prompt: str = PROJECT_PROMPT  # which judge prompt: ours, or public_judge.prompt_label(...)
    attempts: int = 0  # requests sent for this sample (0: none needed or possible)

    def as_dict(self) -> dict:
        return asdict(self)


def sample_score(percent: dict[str, float]) -> float | None:
    """One sample's score: the mean of its scored dimensions (the public `total_score`), None if none."""
    return sum(percent.values()) / len(percent) if percent else None


def summarise(percents: Sequence[dict[str, float]]) -> dict[str, float | None]:
    """The benchmark's aggregate of the judged samples' `percent`: per dimension, the mean over the
    samples that scored it; `score`, the mean of the sample scores. None where nothing was scored."""
    out: dict[str, float | None] = {}
    for d in DIMENSIONS:
        values = [p[d] for p in percents if d in p]
        out[d] = sum(values) / len(values) if values else None
    totals = [s for s in map(sample_score, percents) if s is not None]
    out["score"] = sum(totals) / len(totals) if totals else None
    return out


def to_percent(score: float) -> float:
    """AgentWorldBench's reporting scale: 1 -> 0, 5 -> 100."""
    return (score - 1) / 4 * 100


def _shown_turns(turns: list[tuple[str, str]], max_chars: int) -> str:
    """The earlier turns, newest first until they fill 2 * max_chars: the latest turn (the observation
    the prediction must follow from) always fits, and the oldest go first, as in the model's prompt."""
    shown: list[str] = []
    used = 0
    for action, observation in reversed(turns):
        text = f"{clip(action, max_chars)}\n\n{clip(observation, max_chars)}"
        if shown and used + len(text) > 2 * max_chars:
            break
        shown.insert(0, text)
        used += len(text)
    left_out = len(turns) - len(shown)
    if left_out:
        shown.insert(0, f"[{left_out} older turns not shown]")
    return "\n\n".join(shown) if shown else "(none: this is the first action)"


def _split(context: Sequence[dict]) -> tuple[str, list[tuple[str, str]], str]:
    parts = split_chat(context)
    if parts is None:
        roles = [m.get("role") for m in context]
        raise ValueError(f"judge context must be system, (user, assistant)*, user messages; got {roles}")
    return parts


def judge_messages(
    domain: str, context: Sequence[dict], reference: str, prediction: str, *, max_chars: int = MAX_CHARS
) -> list[dict]:
    """The judge's chat for one prediction. `context` is the world model's prompt: a system message,
    earlier (user, assistant) turns and the current user action. Each text is cut to `max_chars` (head
    and tail kept) and older turns are left out, to fit small judges' contexts."""
    system, turns, action = _split(context)
    user = (
        f"## Environment\n{domain}\n\n"
        f"## The world model's instructions, with the initial state\n{clip(system, max_chars)}\n\n"
        f"## Earlier turns\n{_shown_turns(turns, max_chars)}\n\n"
        f"## Action\n{clip(action, max_chars)}\n\n"
        f"## Real observation\n{clip(reference, max_chars)}\n\n"
        f"## Predicted observation\n{clip(prediction, max_chars)}\n\n"
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
    visible = strip_think(reply)
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


def _public_judge(
    backend: WorldModelBackend,
    domain: str,
    context: Sequence[dict],
    reference: str,
    prediction: str,
    config: GenerationConfig | None,
    max_chars: int | None,
    prompts_dir: str | Path,
) -> JudgeResult:
    """The public protocol: its request, its reply reading, its retries (training/rewards/public_judge.py)."""
    _, turns, action = _split(context)
    label = public_judge.prompt_label(prompts_dir, domain)
    messages = public_judge.messages(
        public_judge.system_prompt(prompts_dir, domain),
        turns,
        action,
        reference,
        prediction,
        max_chars=max_chars,
    )
    reply, error = "", ""
    base = config or public_judge.CONFIG
    for attempt in range(public_judge.ATTEMPTS):
        try:
            # A new seed per attempt: the public code sends none, so its retries draw new samples, while
            # our backends send one and a cache keys on it.
            reply = backend.complete(messages, replace(base, seed=base.seed + attempt))
        except Exception as exc:  # the endpoint's failure is this sample's judge failure, not the run's
            reply, error = "", f"judge request failed: {type(exc).__name__}: {exc}"
            if attempt + 1 < public_judge.ATTEMPTS:
                time.sleep(RETRY_PAUSE_S)
            continue
        scores, error = public_judge.parse_reply(reply)
        if scores is not None:
            percent = {d: to_percent(v) for d, v in scores.items() if v > 0}
            return JudgeResult(scores, raw=reply, percent=percent, prompt=label, attempts=attempt + 1)
    attempts = f" ({public_judge.ATTEMPTS} attempts)"
    return JudgeResult(None, raw=reply, error=error + attempts, prompt=label, attempts=public_judge.ATTEMPTS)


def judge(
    backend: WorldModelBackend,
    *,
    domain: str,
    context: Sequence[dict],
    reference: str,
    prediction: str | None,
    config: GenerationConfig | None = None,
    max_chars: int | None = None,
    prompts_dir: str | Path | None = None,
) -> JudgeResult:
    """Score one prediction in the world model's `context` (its prompt messages; see the module doc). A
    missing prediction, an unreadable reply or a failed request is a JudgeResult with `scores=None`
    and the reason in `error`.

    `prompts_dir`: the public repository's prompts folder, to judge the public way (module doc); a
    domain without its prompt file raises public_judge.JudgePromptError, naming the expected path.
    `config` defaults to JUDGE_CONFIG, or the public sampling; `max_chars` (the cut of each text shown)
    to MAX_CHARS, or no cut."""
    label = public_judge.prompt_label(prompts_dir, domain) if prompts_dir is not None else PROJECT_PROMPT
    if prediction is None:
        return JudgeResult(
            None, error="no predicted observation to judge (no reply from the model)", prompt=label
        )
    if prompts_dir is not None:
        return _public_judge(backend, domain, context, reference, prediction, config, max_chars, prompts_dir)
    messages = judge_messages(
        domain, context, reference, prediction, max_chars=MAX_CHARS if max_chars is None else max_chars
    )
    base = config or JUDGE_CONFIG
    reply, error = "", ""
    # A failed request is sent again, a bounded number of times, so that one flaky answer does not cost an
    # RL sample its judge score; an unreadable reply too when sampling (greedy decoding would only repeat
    # it). A new seed per attempt, as in the public protocol.
    for attempt in range(1, ATTEMPTS + 1):
        try:
            reply = backend.complete(messages, replace(base, seed=base.seed + attempt - 1))
        except Exception as exc:  # the endpoint's failure is this sample's judge failure, not the run's
            reply, error = "", f"judge request failed: {type(exc).__name__}: {exc}"
            if attempt < ATTEMPTS:
                time.sleep(RETRY_PAUSE_S)
            continue
        scores, error = parse_judge_reply(reply)
        if scores is not None:
            percent = {d: to_percent(v) for d, v in scores.items()}
            return JudgeResult(scores, raw=reply, percent=percent, attempts=attempt)
        if base.temperature == 0:
            return JudgeResult(None, raw=reply, error=error, attempts=attempt)
    return JudgeResult(None, raw=reply, error=f"{error} ({ATTEMPTS} attempts)", attempts=ATTEMPTS)

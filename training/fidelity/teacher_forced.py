"""Teacher-forced evaluation: the model sees the REAL history and the action, and predicts one turn.

Also the "repeat the previous observation" baseline, the optional LLM judge of the model's turns and
the pieces closed_loop.py shares: the context budget, one prediction request, one scored row.

A model trained on delta targets (training.targets) answers with an edit script of the previous
observation: every row scores the full observation rebuilt from it, so its numbers compare with a
full-target model's, and a script that does not apply is a format failure (`format_error` says why).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from schemas.records import Trajectory
from schemas.render import Prediction, chat_messages, parse_prediction, previous_observation
from training.backends.base import GenerationConfig, WorldModelBackend
from training.fidelity.metrics import score_against
from training.fidelity.noise_floor import NoiseFloor
from training.rewards.judge import judge
from training.rewards.public_judge import check_prompts
from training.targets import model_target, rebuild


@dataclass
class EvalSettings:
    config: GenerationConfig = field(default_factory=lambda: GenerationConfig(max_new_tokens=1024))
    context_chars: int = 32_000  # oldest turns are dropped past this many characters of prompt
    concurrency: int = 16
    max_turns: int | None = None
    progress: bool = True
    target: str | None = None  # the model's answer form; None: what its checkpoint records


def fits_chars(budget: int) -> Callable[[list[dict]], bool]:
    """A tokenizer-free context check: servers differ in tokenizers, characters do not."""
    return lambda messages: sum(len(m["content"]) for m in messages) <= budget


def turns(trajectories: Iterable[Trajectory], max_turns: int | None) -> list[tuple[Trajectory, int]]:
    return [(t, k) for t in trajectories for k in range(1, len(t.steps[:max_turns]) + 1)]


@dataclass(frozen=True)
class Answer:
    """One model reply as it is scored: `prediction` as the public evaluator reads it (an edit script
    rebuilt into the full observation), and what went wrong."""

    reply: str  # as the model wrote it
    prediction: Prediction
    error: str = ""  # the request failed
    edit_error: str = ""  # an edit script that does not apply

    @property
    def verified_reply(self) -> str:
        """The reply the verifiers check: an applied edit script replaced by the observation it
        rebuilt, the rest (reasoning, tags, stray text) as the model wrote it."""
        script = parse_prediction(self.reply).content
        at = self.reply.rfind(script) if script != self.prediction.content else -1
        if at < 0:
            return self.reply
        return self.reply[:at] + self.prediction.content + self.reply[at + len(script) :]


def predict(
    backend: WorldModelBackend,
    messages: list[dict],
    config: GenerationConfig,
    previous: str = "",
    domain: str = "",
    target: str = "full",
) -> Answer:
    """Ask for one turn. A failed request is scored as an empty untagged reply and not cached, so a
    rerun asks again. With `target` "delta" the answer is applied to `previous`, the observation
    before the turn."""
    try:
        reply = backend.complete(messages, config.for_domain(domain, target))  # its bound (decoding.py)
    except Exception as exc:  # one failed request must not end an evaluation of thousands
        return Answer("", Prediction("", False), f"{type(exc).__name__}: {exc}")
    read = parse_prediction(reply)
    full, edit_error = rebuild(previous, read.content, domain, target)
    return Answer(reply, Prediction(full, read.tagged), edit_error=edit_error)


def scored_row(
    system: str,
    mode: str,
    t: Trajectory,
    turn_idx: int,
    prediction: Prediction,
    floor: NoiseFloor,
    *,
    reply: str = "",
    error: str = "",
    edit_error: str = "",
) -> dict:
    """One turn's scores against the noise floor's templates of that turn, with what was scored. An
    `edit_error` (an edit script that does not apply) makes the turn a format failure."""
    templates = floor.templates_for(t, turn_idx)
    tagged = prediction.tagged and not edit_error
    # The verifiers judge the raw reply; a baseline or a failed request has none (`reply` empty).
    row = score_against(t.domain, prediction.content, templates, tagged, reply or None)
    row.update(
        system=system,
        mode=mode,
        domain=t.domain,
        trajectory_id=t.trajectory_id,
        turn_idx=turn_idx,
        prediction=prediction.content,
        format_failure=not tagged and not error,
        error=error,
        reply_chars=len(reply),
        volatile_share=floor.volatile_share(t, turn_idx),
    )
    if edit_error:
        row["format_error"] = edit_error
    return row


def answer_row(
    system: str, mode: str, t: Trajectory, turn_idx: int, answer: Answer, floor: NoiseFloor
) -> dict:
    """`scored_row` of a model's answer."""
    row = scored_row(
        system,
        mode,
        t,
        turn_idx,
        answer.prediction,
        floor,
        reply=answer.verified_reply,
        error=answer.error,
        edit_error=answer.edit_error,
    )
    row["reply_chars"] = len(answer.reply)  # what the model wrote, not what it stood for
    return row


def run_concurrently(
    work: Callable, items: Sequence, settings: EvalSettings, desc: str, unit: str = "turn"
) -> list:
    """Results in the order of `items`, computed by `settings.concurrency` threads."""
    with ThreadPoolExecutor(max(1, settings.concurrency), thread_name_prefix="fidelity") as pool:
        results = pool.map(lambda item: work(*item), items)
        return list(tqdm(results, total=len(items), desc=desc, unit=unit, disable=not settings.progress))


def teacher_forced(
    backend: WorldModelBackend,
    trajectories: Sequence[Trajectory],
    floor: NoiseFloor,
    settings: EvalSettings,
    system: str = "model",
) -> list[dict]:
    fits = fits_chars(settings.context_chars)
    target = settings.target or model_target(backend)

    def one(t: Trajectory, k: int) -> dict:
        previous = previous_observation(t, k).text
        messages = chat_messages(t, k, fits=fits)
        answer = predict(backend, messages, settings.config, previous, t.domain, target)
        return answer_row(system, "teacher_forced", t, k, answer, floor)

    return run_concurrently(
        one, turns(trajectories, settings.max_turns), settings, f"{system} teacher-forced"
    )


def repeat_previous(
    trajectories: Sequence[Trajectory], floor: NoiseFloor, max_turns: int | None
) -> list[dict]:
    """The baseline a world model must beat: nothing changes, the last screen comes back."""
    rows = []
    for t, k in turns(trajectories, max_turns):
        previous = t.steps[k - 2].observation.text if k > 1 else t.initial_observation.text
        rows.append(scored_row("repeat_previous", "teacher_forced", t, k, Prediction(previous, True), floor))
    return rows


def judge_rows(
    judge_backend: WorldModelBackend,
    rows: list[dict],
    trajectories: Sequence[Trajectory],
    settings: EvalSettings,
    max_chars: int | None = None,
    prompts_dir: str | Path | None = None,
) -> None:
    """Add the judge's five scores (or its failure) to each row, in place. `prompts_dir`: judge the
    public AgentWorldBench way with its prompts (rewards/judge.py); a domain without its prompt raises
    JudgePromptError before any request. `max_chars`: see training.rewards.judge.judge."""
    by_id = {t.trajectory_id: t for t in trajectories}
    if prompts_dir is not None:
        check_prompts(prompts_dir, {by_id[r["trajectory_id"]].domain for r in rows})
    fits = fits_chars(settings.context_chars)

    def one(row: dict) -> dict:
        t = by_id[row["trajectory_id"]]
        k = row["turn_idx"]
        result = judge(
            judge_backend,
            domain=t.domain,
            # The judge sees the prompt the model was sent, so it grades against what the model knew.
            context=chat_messages(t, k, fits=fits),
            reference=t.steps[k - 1].observation.text,
            prediction=None if row["error"] else row["prediction"],  # a failed request has no reply
            max_chars=max_chars,
            prompts_dir=prompts_dir,
        )
        return result.as_dict()

    results = run_concurrently(one, [(r,) for r in rows], settings, "judge")
    for row, result in zip(rows, results, strict=True):
        row["judge"] = {key: result[key] for key in ("scores", "percent", "error", "prompt")}

"""The project's scorer of a teacher's candidate reply, for reasoning synthesis
(`build_corpus --synthesize-reasoning`, which finds it by its entry point, `candidates` in the group
`agentworld.synthesis_scorers`, pyproject.toml). It sits above fidelity and rewards, whose measures
it combines, so that rewards need not import fidelity.

A candidate is scored on what the fidelity report and the RL reward already measure, against the real
observation as a stable template (one real run, no noise floor): the domain's main fidelity metric on
the reply's predicted observation, the rule verifiers' verdict on the whole reply and, where a judge is
configured, the judge's mean percent. The score is the mean of the parts there are, in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from schemas.render import extract_prediction
from training.backends import WorldModelBackend, make_backend
from training.fidelity.comparison import main_score
from training.fidelity.metrics import score_turn
from training.observations.template import Template
from training.rewards.judge import judge, sample_score


@lru_cache(maxsize=4)
def _judge_backend(url: str) -> WorldModelBackend:
    return make_backend(url)  # one connection pool per judge for the whole worker


def _judged(url: str, domain: str, messages: Sequence[dict], reference: str, prediction: str) -> float | None:
    result = judge(
        _judge_backend(url), domain=domain, context=messages, reference=reference, prediction=prediction
    )
    percent = sample_score(result.percent)
    return None if percent is None else percent / 100  # an unreadable judge reply is no part of the score


def score(
    domain: str, messages: Sequence[dict], reference: str, reply: str, *, judge_url: str | None = None
) -> dict:
    """{"score": mean of the parts, "verified": bool, "fidelity": float, "judge": float | None}. A reply
    without a closed <predicted_observation> block predicts nothing: fidelity 0, not verified, judge 0."""
    prediction = extract_prediction(reply)
    if prediction is None:
        fidelity, verified = 0.0, False
        judged = 0.0 if judge_url else None
    else:
        row = score_turn(domain, prediction, Template.stable(reference), reply=reply).as_dict()
        fidelity, verified = main_score({**row, "domain": domain}), bool(row["verified"])
        judged = _judged(judge_url, domain, messages, reference, prediction) if judge_url else None
    parts = [fidelity, float(verified), *([judged] if judged is not None else [])]
    return {"score": sum(parts) / len(parts), "verified": verified, "fidelity": fidelity, "judge": judged}

"""Per-turn fidelity metrics (pure): how close a predicted observation is to the real one.

Volatile content is handled through a `Template` made by the noise floor (noise_floor.py): the real
observation cut into stable spans, which a prediction must reproduce exactly, and volatile spans
(timestamps, PIDs, temp names seen to differ between real runs), which it must only fill with text of
the same character-class form and of a bounded length. Without a noise floor every span is stable.

The content scored is what the public evaluator reads from a reply (`schemas.render.parse_prediction`);
whether the reply used the `<predicted_observation>` format is its own column (`tagged`),
`format_valid` needs both the tags and the domain's format rule, and `verified` is the rule verifiers'
verdict on the raw reply (training/rewards/verifiers: strict extraction, format, deterministic content, no
commentary), the binary a reward is anchored on. Format rules live in training/rewards/verifiers/formats.py,
the one definition both use.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from rapidfuzz.distance import Levenshtein

from schemas.records import Observation
from schemas.render import target_text
from training.fidelity.domain_metrics import ALL_DOMAIN_METRICS, domain_scores
from training.observations.template import Template, match_volatile
from training.rewards.verifiers import format_valid, verify


@dataclass
class TurnScore:
    exact: bool  # the whole text equals the real one
    stable_exact: bool  # every stable span reproduced exactly (volatile spans may hold anything)
    # Share of volatile spans filled with a form some real run had; None when there are none, or when
    # the stable content did not match (then the volatile spans cannot be located in the prediction).
    volatile_form: float | None
    edit_similarity: float  # 1 - normalised Levenshtein distance
    line_precision: float
    line_recall: float
    line_f1: float
    tagged: bool  # the reply held a <predicted_observation> block (the public format)
    format_valid: bool  # tagged, and the content passes the domain's format rule (training/rewards/verifiers)
    # The rule verifiers' binary verdict on the whole reply (strict tags, format, deterministic content
    # against this template, no commentary): the RL reward's anchor.
    verified: bool
    # The domain's own metrics (domain_metrics.py: tree lines, result lists), flattened into as_dict.
    domain_metrics: dict[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict:
        row = asdict(self)
        own = row.pop("domain_metrics")
        return {**row, **own}


def line_prf(prediction: str, reference: str) -> tuple[float, float, float]:
    """Multiset overlap of lines (trailing spaces ignored): precision, recall, F1."""
    pred = Counter(line.rstrip() for line in prediction.split("\n"))
    ref = Counter(line.rstrip() for line in reference.split("\n"))
    common = sum((pred & ref).values())
    p = common / max(1, sum(pred.values()))
    r = common / max(1, sum(ref.values()))
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def score_turn(
    domain: str, content: str, template: Template, tagged: bool = True, reply: str | None = None
) -> TurnScore:
    """Score one predicted observation's `content` against the real one's template; `tagged` says
    whether the reply carried it in the public format (real observations and baselines always do).
    `reply` is the model's raw reply for the verifiers; without one, the content as a model is trained
    to answer it (tagged) or as it came (untagged)."""
    reference = template.text
    captured = match_volatile(template, content)
    volatile = template.volatile_spans
    if not volatile or captured is None:
        form = None
    else:
        ok = sum(bool(re.fullmatch(s.form(), c)) for s, c in zip(volatile, captured, strict=True))
        form = ok / len(volatile)
    p, r, f1 = line_prf(content, reference)
    if reply is None:
        reply = target_text(Observation("", content)) if tagged else content
    return TurnScore(
        exact=content == reference,
        stable_exact=captured is not None,
        volatile_form=form,
        edit_similarity=Levenshtein.normalized_similarity(content, reference),
        line_precision=p,
        line_recall=r,
        line_f1=f1,
        tagged=tagged,
        format_valid=tagged and format_valid(domain, content, reference),
        verified=verify(domain, reply, reference, template).ok,
        domain_metrics=domain_scores(domain, content, reference, template.others),
    )


def score_against(
    domain: str, content: str, templates: Sequence[Template], tagged: bool = True, reply: str | None = None
) -> dict:
    """The mean score over several templates of the same real turn (the noise floor's leave-one-out
    templates), so a prediction is judged exactly as each held-out real run is. Metrics that do not
    depend on the volatile spans come out the same for every template; `verified` and `stable_exact`
    may not, and then are the share of templates that passed."""
    scores = [score_turn(domain, content, t, tagged, reply).as_dict() for t in templates]
    out: dict = {}
    for name, first in scores[0].items():
        values = [s[name] for s in scores if s[name] is not None]
        if isinstance(first, bool) and all(v == first for v in values):
            out[name] = first
        else:
            out[name] = sum(float(v) for v in values) / len(values) if values else None
    return out


METRICS = (
    "exact",
    "stable_exact",
    "volatile_form",
    "edit_similarity",
    "line_precision",
    "line_recall",
    "line_f1",
    "tagged",
    "format_valid",
    "verified",
)


def mean_scores(rows: Iterable[dict]) -> dict[str, float | int | None]:
    """Means of every metric over rows of TurnScore dicts (None values skipped), plus `turns`; a
    domain's own metrics where rows carry them."""
    rows = list(rows)
    out: dict[str, float | int | None] = {"turns": len(rows)}
    own = [m for m in ALL_DOMAIN_METRICS if any(m in r for r in rows)]
    for name in (*METRICS, *own):
        values = [float(r[name]) for r in rows if r.get(name) is not None]
        out[name] = sum(values) / len(values) if values else None
    return out


def aggregate(rows: Iterable[dict]) -> dict:
    """Rows carry `domain`, `turn_idx` and the metrics: means per domain, overall and by turn index."""
    rows = list(rows)
    by_domain: dict[str, list[dict]] = defaultdict(list)
    by_turn: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        by_domain[row["domain"]].append(row)
        by_turn[int(row["turn_idx"])].append(row)
    return {
        "overall": mean_scores(rows),
        "by_domain": {d: mean_scores(rs) for d, rs in sorted(by_domain.items())},
        "by_turn": {str(k): mean_scores(rs) for k, rs in sorted(by_turn.items())},
    }

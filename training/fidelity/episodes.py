"""Task-level sim-vs-real (pure): the same policy's episodes on real and on simulated sandboxes, paired.

Episodes pair by (domain, task id, episode slot): a collector run seeds its policy's randomness with
(seed, slot), so with the same seed a scripted or explorer policy takes the same decisions on both sides
for as long as what it sees does not steer it. Each pair gives:

- the two task rewards as verdicts (agreement.py): success, failure or none;
- the steps each took to the end (the outcome's status beside them);
- the turn of first divergence, 1-based: the first turn whose actions differ (kind and arguments), or,
  where the actions are the same, whose simulated observation no longer matches the real one: the
  domain's main fidelity metric (its record's main_metrics, edit similarity where a domain has none; the
  same score as the observation-level report, against the real text alone, no noise floor) falls below
  the match threshold. When one side stops while the other goes on with everything equal so far, the
  divergence is the first turn only one side has ("length"); "none" when neither ever diverged;
- single-step accuracy's counts (task_numbers.py) over the turns before the actions first differ, and the
  WM2Real replay of the simulated actions where one was run (wm2real.py).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from schemas.records import Action, Trajectory
from training.fidelity.agreement import cohens_kappa, confusion, verdict
from training.fidelity.bootstrap import paired_difference
from training.fidelity.comparison import main_metric, main_score
from training.fidelity.metrics import score_turn
from training.fidelity.task_numbers import numbers, single_step
from training.fidelity.wm2real import Wm2Real
from training.observations.template import Template

DEFAULT_SUCCESS = 1.0
DEFAULT_MATCH = 0.8
KINDS = ("action", "observation", "length", "none")

Key = tuple[str, str, str]  # (domain, task id, slot)


def pair_key(t: Trajectory) -> Key:
    """The runner records each episode's slot in its task metadata; without one (a dataset from
    elsewhere) the trajectory id stands in, which the runner derives from the same slot."""
    slot = t.task.metadata.get("slot")
    return (t.domain, t.task.id, str(slot) if slot is not None else t.trajectory_id)


def pair_up(
    real: Iterable[Trajectory], sim: Iterable[Trajectory]
) -> tuple[list[tuple[Trajectory, Trajectory]], list[Key], list[Key]]:
    """(pairs in key order, keys only the real side has, keys only the simulated side has). A key seen
    twice on one side (two runs in one dataset) is an error: which episode to pair would be a guess."""
    sides: list[dict[Key, Trajectory]] = [{}, {}]
    for side, trajectories in zip(sides, (real, sim), strict=True):
        for t in trajectories:
            key = pair_key(t)
            if key in side:
                raise ValueError(
                    f"two episodes of task {key[1]!r} slot {key[2]} in one dataset ({side[key].trajectory_id}"
                    f", {t.trajectory_id}): compare datasets of one collector run each"
                )
            side[key] = t
    real_by, sim_by = sides
    both = sorted(real_by.keys() & sim_by.keys(), key=_slot_order)
    return (
        [(real_by[k], sim_by[k]) for k in both],
        sorted(real_by.keys() - sim_by.keys(), key=_slot_order),
        sorted(sim_by.keys() - real_by.keys(), key=_slot_order),
    )


def _slot_order(key: Key) -> tuple[str, int, str, str]:
    """Domain, then slot (a number's digits sort by length first: 2 before 10), then task."""
    return (key[0], len(key[2]), key[2], key[1])


def action_key(action: Action) -> str:
    return json.dumps([action.kind, action.arguments], sort_keys=True, default=str)


def observation_match(domain: str, predicted: str, real: str) -> float:
    """The domain's main fidelity score of a simulated observation against the real one."""
    row = {"domain": domain, **score_turn(domain, predicted, Template.stable(real)).as_dict()}
    return main_score(row)


@dataclass
class Divergence:
    turn: int | None  # 1-based; None: never diverged
    kind: str  # one of KINDS
    action_turn: int | None  # the first turn whose actions differ (or only one side has)
    scores: list[float] = field(default_factory=list)  # observation match of each same-action turn

    def as_dict(self) -> dict:
        return asdict(self)


def first_divergence(real: Trajectory, sim: Trajectory, match: float = DEFAULT_MATCH) -> Divergence:
    scores: list[float] = []
    observation_turn = None
    for k, (r, s) in enumerate(zip(real.steps, sim.steps, strict=False), 1):
        if action_key(r.action) != action_key(s.action):
            if observation_turn is not None:
                return Divergence(observation_turn, "observation", k, scores)
            return Divergence(k, "action", k, scores)
        scores.append(observation_match(real.domain, s.observation.text, r.observation.text))
        if observation_turn is None and scores[-1] < match:
            observation_turn = k
    shorter = min(len(real.steps), len(sim.steps))
    action_turn = shorter + 1 if len(real.steps) != len(sim.steps) else None
    if observation_turn is not None:
        return Divergence(observation_turn, "observation", action_turn, scores)
    if action_turn is not None:
        return Divergence(action_turn, "length", action_turn, scores)
    return Divergence(None, "none", None, scores)


def same_action_turns(real: Trajectory, sim: Trajectory) -> list[tuple[str, str]]:
    """(real, simulated) observation texts of the turns before the actions first differ."""
    turns = []
    for r, s in zip(real.steps, sim.steps, strict=False):
        if action_key(r.action) != action_key(s.action):
            break
        turns.append((r.observation.text, s.observation.text))
    return turns


def episode_row(
    real: Trajectory,
    sim: Trajectory,
    success: float,
    match: float,
    replay: Wm2Real | None = None,
    run: str = "",
) -> dict:
    """One pair, as the report's episodes list holds it; `replay` is the simulated actions' WM2Real
    replay (None: not replayed), `run` the policy run the pair belongs to."""
    found = first_divergence(real, sim, match)
    replayed = replay.observations if replay is not None else None
    return {
        "run": run,
        "domain": real.domain,
        "task_id": real.task.id,
        "slot": pair_key(real)[2],
        "real_id": real.trajectory_id,
        "sim_id": sim.trajectory_id,
        "policy": [real.policy.name, sim.policy.name],
        "real": _side(real, success),
        "sim": _side(sim, success),
        "divergence": found.as_dict(),
        "single_step": single_step(real.domain, same_action_turns(real, sim), replayed),
        "wm2real": None if replay is None else _replayed(replay, success),
    }


def _replayed(replay: Wm2Real, success: float) -> dict:
    return {
        "reward": replay.reward,
        "verdict": verdict(replay.reward, success),
        "status": replay.status,
        "steps": replay.steps,
        "verifier": replay.verifier,
        "error": replay.error,
        "attempts": replay.attempts,
    }


def _side(t: Trajectory, success: float) -> dict:
    v = t.outcome.verification
    return {
        "steps": len(t.steps),
        "status": t.outcome.status,
        "reward": t.outcome.reward,
        "verdict": verdict(t.outcome.reward, success),
        "verifier": v.verifier if v else "",
        "verifier_error": v.error if v else "",
        # how a simulated verdict was reached (training.simulated_verify): likelihood, generation, ...
        "verdict_method": str(v.details.get("method", "")) if v else "",
        "simulated": t.provenance.simulated,
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def domain_summary(domain: str, rows: list[dict], real_only: list[Key], sim_only: list[Key]) -> dict:
    """One domain's agreement, steps and divergence over its episode rows."""
    verdicts = [(r["real"]["verdict"], r["sim"]["verdict"]) for r in rows]
    return {
        "pairs": len(rows),
        "real_only": [list(k) for k in real_only],
        "sim_only": [list(k) for k in sim_only],
        "policies": sorted({p for r in rows for p in r["policy"]}),
        "reward": _rewards(rows, verdicts),
        "steps": _steps(rows),
        "divergence": _divergence(rows, domain),
        # single-step accuracy, simulated vs real success with the inflation, WM2Real (task_numbers.py)
        "numbers": numbers(rows),
    }


def _rewards(rows: list[dict], verdicts: list[tuple[str, str]]) -> dict:
    both = [r for r in rows if r["real"]["reward"] is not None and r["sim"]["reward"] is not None]
    out = {
        "confusion": confusion(verdicts),
        "kappa": cohens_kappa(verdicts).as_dict(),
        "agreement": _mean([float(a == b) for a, b in verdicts if "none" not in (a, b)]),
        "mean_real": _mean([r["real"]["reward"] for r in both]),
        "mean_sim": _mean([r["sim"]["reward"] for r in both]),
        "both_rewarded": len(both),
    }
    methods = Counter(r["sim"].get("verdict_method") or "(unsaid)" for r in rows if r["sim"]["verifier"])
    out["sim_verdict_methods"] = dict(methods)
    for side in ("real", "sim"):
        out[f"{side}_verifiers"] = dict(Counter(r[side]["verifier"] or "(none)" for r in rows))
        reasons = Counter(r[side]["verifier_error"][:200] for r in rows if r[side]["reward"] is None)
        out[f"{side}_none_reasons"] = {k or "(no verifier)": n for k, n in reasons.items()}
    return out


def _steps(rows: list[dict]) -> dict:
    real = {(n, 0): float(r["real"]["steps"]) for n, r in enumerate(rows)}
    sim = {(n, 0): float(r["sim"]["steps"]) for n, r in enumerate(rows)}
    diffs = [sim[k] - real[k] for k in real]
    return {
        "real_mean": _mean(list(real.values())),
        "sim_mean": _mean(list(sim.values())),
        # sim minus real, paired by episode, with its bootstrap interval over episodes
        "difference": paired_difference(sim, real).as_dict() if rows else None,
        "difference_median": _median(diffs),
        "equal": sum(d == 0 for d in diffs),
        "sim_shorter": sum(d < 0 for d in diffs),
        "sim_longer": sum(d > 0 for d in diffs),
        "real_status": dict(Counter(r["real"]["status"] for r in rows)),
        "sim_status": dict(Counter(r["sim"]["status"] for r in rows)),
    }


def _divergence(rows: list[dict], domain: str) -> dict:
    found = [r["divergence"] for r in rows]
    turns = [float(d["turn"]) for d in found if d["turn"] is not None]
    longest = max((len(d["scores"]) for d in found), default=0)
    by_turn = {}
    for k in range(1, longest + 1):
        scores = [d["scores"][k - 1] for d in found if len(d["scores"]) >= k]
        by_turn[str(k)] = {"pairs": len(scores), "mean": _mean(scores)}
    last = max((int(t) for t in turns), default=0)
    return {
        "metric": list(main_metric(domain)),
        "by_kind": {kind: sum(d["kind"] == kind for d in found) for kind in KINDS},
        "turn_mean": _mean(turns),
        "turn_median": _median(turns),
        # the share of pairs still undiverged after each turn (a pair that never diverged counts throughout)
        "undiverged_after": {
            str(k): sum(d["turn"] is None or d["turn"] > k for d in found) / len(found)
            for k in range(1, last + 1)
        },
        # the observation match of same-action turns, by turn
        "match_by_turn": by_turn,
    }


def compare_datasets(
    real: Iterable[Trajectory],
    sim: Iterable[Trajectory],
    success: float = DEFAULT_SUCCESS,
    match: float = DEFAULT_MATCH,
    replays: Mapping[str, Wm2Real] | None = None,
    run: str = "",
) -> tuple[dict[str, dict], list[dict]]:
    """({domain: summary}, episode rows). `replays`: WM2Real replays by simulated trajectory id."""
    pairs, real_only, sim_only = pair_up(real, sim)
    found = replays or {}
    rows = [episode_row(r, s, success, match, found.get(s.trajectory_id), run) for r, s in pairs]
    return summarize(rows, real_only, sim_only), rows


def summarize(rows: list[dict], real_only: list[Key], sim_only: list[Key]) -> dict[str, dict]:
    """{domain: summary} of episode rows (of one run, or of several runs pooled)."""
    domains = sorted({r["domain"] for r in rows} | {k[0] for k in real_only + sim_only})
    return {
        d: domain_summary(
            d,
            [r for r in rows if r["domain"] == d],
            [k for k in real_only if k[0] == d],
            [k for k in sim_only if k[0] == d],
        )
        for d in domains
    }

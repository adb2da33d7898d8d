"""The three task-level sim-to-real numbers (pure), per domain and policy, and what they say across policies.

1. **Single-step accuracy**: the share of simulated turns whose deterministic content is right. A turn
   counts while the simulated episode's actions are still the real episode's (the same action from the
   same history, so the real observation is the answer); its simulated observation is right when it
   reproduces every stable span of the real one, the `stable_exact` of the observation-level report
   (metrics.score_turn). Stable and volatile spans come from real runs as the noise floor finds them
   (noise_floor.volatile_template): the WM2Real replay plays the same actions on those turns, so it
   is a second real run of them; a turn without one (no replay, or one cut short) is scored against
   the real text alone, every span stable: strict, so the number is then a lower bound.
2. **Success inside the simulator vs in the real sandbox**: success rates over the pairs rewarded on
   both sides (so the inflation below is exactly their difference), beside the confusion matrix and
   Cohen's kappa of episodes.py.
3. **WM2Real**: the success rate of the simulated episodes' actions replayed for real (wm2real.py),
   over the replays the real verifier rewarded.

Across policies (at least three to mean anything): Spearman's rank correlation between the policies'
simulated and real success rates (does the simulator rank policies as reality does?), and the
inflation, simulated minus real success, with a paired cluster bootstrap interval (bootstrap.py)
whose clusters are tasks: the episodes of one task share its difficulty.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from training.fidelity.agreement import NONE, SUCCESS
from training.fidelity.bootstrap import paired_difference
from training.fidelity.metrics import score_turn
from training.fidelity.noise_floor import volatile_template
from training.observations.template import Template

MIN_POLICIES = 3


def single_step(domain: str, same_action: Sequence[tuple[str, str]], replayed: Sequence[str] | None) -> dict:
    """One pair's same-action turns, given as (real, simulated) observation texts from the first turn:
    how many, how many right, and how many were scored with a real replay's volatile spans."""
    right = measured = 0
    for k, (real, sim) in enumerate(same_action, 1):
        if replayed is not None and len(replayed) >= k:
            template = volatile_template(real, [replayed[k - 1]])
            measured += 1
        else:
            template = Template.stable(real)
        right += score_turn(domain, sim, template).stable_exact
    return {"turns": len(same_action), "right": right, "measured": measured}


def _rate(hits: int, n: int) -> float | None:
    return hits / n if n else None


def _cluster_key(row: dict) -> tuple[str, str]:
    """(task, run/slot): the bootstrap resamples tasks; the run tells apart one slot of two policies."""
    return (row["task_id"], f"{row.get('run', '')}/{row['slot']}")


def numbers(rows: list[dict]) -> dict:
    """The three numbers over episode rows (episodes.episode_row, with `single_step` and `wm2real`)."""
    steps = [r["single_step"] for r in rows]
    turns, right = sum(s["turns"] for s in steps), sum(s["right"] for s in steps)
    rated = [r for r in rows if NONE not in (r["real"]["verdict"], r["sim"]["verdict"])]
    real = {_cluster_key(r): float(r["real"]["verdict"] == SUCCESS) for r in rated}
    sim = {_cluster_key(r): float(r["sim"]["verdict"] == SUCCESS) for r in rated}
    replays = [r["wm2real"] for r in rows if r.get("wm2real") is not None]
    judged = [w for w in replays if w["verdict"] != NONE]
    reasons = Counter(w["error"][:200] or "(no reason)" for w in replays if w["verdict"] == NONE)
    return {
        "single_step": {
            "turns": turns,
            "right": right,
            "accuracy": _rate(right, turns),
            "turns_with_replay_spans": sum(s["measured"] for s in steps),
        },
        "success": {
            "rated": len(rated),
            "real_successes": int(sum(real.values())),
            "sim_successes": int(sum(sim.values())),
            "real_rate": _rate(int(sum(real.values())), len(rated)),
            "sim_rate": _rate(int(sum(sim.values())), len(rated)),
            # simulated minus real, paired by episode, bootstrap over tasks
            "inflation": paired_difference(sim, real).as_dict() if rated else None,
        },
        "wm2real": {
            "replayed": len(replays),
            "rewarded": len(judged),
            "successes": sum(w["verdict"] == SUCCESS for w in judged),
            "success_rate": _rate(sum(w["verdict"] == SUCCESS for w in judged), len(judged)),
            "none_reasons": dict(reasons),
        },
    }


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties given the mean of the ranks they span (as Spearman's rho takes them)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> dict:
    """Spearman's rho: Pearson's correlation of the two rank lists; undefined (value None, `undefined`
    says why) with fewer than MIN_POLICIES points or when one side ranks everything the same."""
    n = len(xs)
    if n < MIN_POLICIES:
        return {"value": None, "n": n, "undefined": f"{n} policies: a rank correlation needs {MIN_POLICIES}"}
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx, vy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        side = "simulated" if vx == 0 else "real"
        return {"value": None, "n": n, "undefined": f"every policy has the same {side} success rate"}
    return {"value": cov / (vx * vy) ** 0.5, "n": n, "undefined": ""}


def across_policies(by_policy: dict[str, list[dict]]) -> dict:
    """One domain's policies side by side: their rates, Spearman over those with a rated pair, and the
    inflation pooled over every policy's rated pairs."""
    table = {name: numbers(rows) for name, rows in by_policy.items()}
    ranked = [n for n, t in table.items() if t["success"]["rated"]]
    sim = [table[n]["success"]["sim_rate"] for n in ranked]
    real = [table[n]["success"]["real_rate"] for n in ranked]
    pooled = numbers([r for rows in by_policy.values() for r in rows])
    return {
        "policies": ranked,
        "sim_rates": sim,
        "real_rates": real,
        "spearman": spearman(sim, real),
        "inflation": pooled["success"]["inflation"],
    }

"""Several systems on the same held-out turns, side by side per domain on the domain's main metric,
with a paired bootstrap interval (bootstrap.py) for each difference between two of them.

The systems are teacher-forced: each sees the real history, so every system predicts exactly the same
turns and their scores pair up turn by turn. The real-vs-real ceiling stands beside them, without a
difference (its turns are the real replays, not predictions).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from sandboxes.domains import find_domain
from training.fidelity.bootstrap import LEVEL, RESAMPLES, SEED, paired_difference

# The one number per domain a comparison is read on: the first metric of the chain that applies to a
# turn (the domain record's main_metrics: a search turn is a result list or an extracted page).
# Edit similarity, which every turn has, closes each chain, so every system scores every turn.
FALLBACK_METRIC = "edit_similarity"
TEACHER_FORCED = "teacher_forced"


def main_metric(domain: str) -> tuple[str, ...]:
    spec = find_domain(domain)
    return (*(spec.main_metrics if spec else ()), FALLBACK_METRIC)


def main_score(row: dict) -> float:
    """The turn's main score: the first metric of its domain's chain that applies to it."""
    for metric in main_metric(row["domain"]):
        if row.get(metric) is not None:
            return float(row[metric])
    raise ValueError(f"a scored row without {FALLBACK_METRIC}: {sorted(row)}")


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rate(rows: list[dict], field: str) -> float | None:
    values = [float(r[field]) for r in rows if r.get(field) is not None]
    return _mean(values)


ROLES = ("model", "compare", "base", "baseline")


def compare(
    systems: dict[str, list[dict]],
    ceiling: list[dict],
    roles: dict[str, str],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict:
    """`systems`: name -> teacher-forced rows; `roles`: name -> one of ROLES. Differences are taken
    as each system minus every later one in the order of ROLES (trained models first, then the base,
    then the repeat-previous baseline), so a positive difference favours the more trained system."""
    names = sorted((n for n, rows in systems.items() if rows), key=lambda n: ROLES.index(roles[n]))
    domains = sorted({r["domain"] for n in names for r in systems[n]})
    out: dict = {
        "systems": names,
        "roles": {n: roles[n] for n in names},
        "reference": next((n for n in names if roles[n] == "base"), None),
        "baseline": next((n for n in names if roles[n] == "baseline"), None),
        "mode": TEACHER_FORCED,
        "main_metric": {d: list(main_metric(d)) for d in domains},
        "bootstrap": {"resamples": resamples, "seed": seed, "level": LEVEL, "cluster": "trajectory"},
        "domains": {},
    }
    for domain in domains:
        rows = {n: [r for r in systems[n] if r["domain"] == domain] for n in names}
        scores = {n: {(r["trajectory_id"], r["turn_idx"]): main_score(r) for r in rows[n]} for n in names}
        real = [main_score(r) for r in ceiling if r["domain"] == domain]
        entry: dict = {
            "main_metric": main_metric(domain)[0],
            "turns": max(len(s) for s in scores.values()),
            "trajectories": len({key[0] for s in scores.values() for key in s}),
            "ceiling": _mean(real),
            "values": {n: _mean(list(scores[n].values())) for n in names},
            "format_valid": {n: _rate(rows[n], "format_valid") for n in names},
        }
        entry["differences"] = _differences(names, scores, resamples, seed)
        if any("verified" in r for n in names for r in rows[n]):
            entry["verified"] = {n: _rate(rows[n], "verified") for n in names}
            # the RL reward's anchor: is one system's pass rate above another's beyond resampling noise
            passed = {
                n: {
                    (r["trajectory_id"], r["turn_idx"]): float(r["verified"])
                    for r in rows[n]
                    if "verified" in r
                }
                for n in names
            }
            entry["verified_differences"] = _differences(names, passed, resamples, seed)
        out["domains"][domain] = entry
    out["summary"] = _summary(out["domains"])
    return out


def _differences(names: list[str], scores: dict[str, dict], resamples: int, seed: int) -> list[dict]:
    return [
        {"a": a, "b": b, **paired_difference(scores[a], scores[b], resamples=resamples, seed=seed).as_dict()}
        for a, b in combinations(names, 2)
        if scores[a] and scores[b]
    ]


def _summary(domains: dict[str, dict]) -> list[dict]:
    """Per pair: the domains where a is better or worse than b with the interval excluding 0."""
    pairs: dict[tuple[str, str], dict] = {}
    for domain, entry in domains.items():
        for d in entry["differences"]:
            tally = pairs.setdefault(
                (d["a"], d["b"]), {"a": d["a"], "b": d["b"], "better_in": [], "worse_in": []}
            )
            tally.setdefault("domains", []).append(domain)
            if d["excludes_zero"]:
                tally["better_in" if d["difference"] > 0 else "worse_in"].append(domain)
    return list(pairs.values())


def summary_lines(comparison: dict) -> list[str]:
    """One sentence per shown pair: in how many domains a is better or worse, the interval excluding 0."""
    tallies = {(t["a"], t["b"]): t for t in comparison["summary"]}
    out = []
    for pair in shown_pairs(comparison):  # each in the order the differences were taken
        if pair in tallies:
            t = tallies[pair]
            better, worse = ", ".join(t["better_in"]) or "none", ", ".join(t["worse_in"]) or "none"
            out.append(
                f"{t['a']} vs {t['b']}: better in {len(t['better_in'])} of {len(t['domains'])} domains "
                f"({better}), worse in {len(t['worse_in'])} ({worse}), by a 95% interval that excludes 0."
            )
    return out


def find_difference(entry: dict, a: str, b: str, key: str = "differences") -> dict | None:
    """The difference a - b of a domain's entry (`key`: of the main metric, or "verified_differences"),
    turned around when it was taken as b - a."""
    for d in entry.get(key, ()):
        if (d["a"], d["b"]) == (a, b):
            return d
        if (d["a"], d["b"]) == (b, a):
            low, high = d["ci_low"], d["ci_high"]
            return {
                **d,
                "a": a,
                "b": b,
                "difference": -d["difference"],
                "ci_low": None if high is None else -high,
                "ci_high": None if low is None else -low,
            }
    return None


def signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


def difference_text(d: dict | None) -> str:
    """'+0.120 [+0.050, +0.190]*': the star marks an interval that excludes 0."""
    if d is None:
        return "-"
    if d["ci_low"] is None:
        return f"{signed(d['difference'])} (one trajectory: no interval)"
    star = "*" if d["excludes_zero"] else ""
    return f"{signed(d['difference'])} [{signed(d['ci_low'])}, {signed(d['ci_high'])}]{star}"


def shown_pairs(comparison: dict) -> list[tuple[str, str]]:
    """The differences a table shows: every other system against the reference (the base) and
    against the baseline (repeat-previous); report.json holds every pair."""
    reference, baseline = comparison["reference"], comparison["baseline"]
    pairs = []
    for anchor in (reference, baseline):
        if anchor in comparison["systems"]:
            pairs += [(n, anchor) for n in comparison["systems"] if n not in (reference, baseline)]
    if reference in comparison["systems"] and baseline in comparison["systems"]:
        pairs.append((reference, baseline))
    return pairs


def comparison_table(comparison: dict) -> tuple[list[str], list[list[str]]]:
    """(header, rows): per domain, its main metric, the ceiling, each system's value and the differences."""
    names = comparison["systems"]
    pairs = shown_pairs(comparison)
    header = ["domain", "main metric", "real vs real", *names, *(f"{a} - {b} (95% CI)" for a, b in pairs)]
    body = []
    for domain, entry in comparison["domains"].items():
        row = [domain, entry["main_metric"], _fmt(entry["ceiling"])]
        row += [_fmt(entry["values"][n]) for n in names]
        row += [difference_text(find_difference(entry, a, b)) for a, b in pairs]
        body.append(row)
    return header, body


def rate_table(comparison: dict) -> tuple[list[str], list[list[str]]]:
    """(header, rows): per domain, each system's format-valid rate, and its verified rate where the
    rows carried one."""
    names = comparison["systems"]
    verified = any("verified" in e for e in comparison["domains"].values())
    header = ["domain", *(f"{n} format valid" for n in names)]
    pairs = shown_pairs(comparison) if verified else []
    header += [f"{n} verified" for n in names] if verified else []
    header += [f"{a} - {b} verified (95% CI)" for a, b in pairs]
    body = []
    for domain, entry in comparison["domains"].items():
        row = [domain, *(_percent(entry["format_valid"][n]) for n in names)]
        if verified:
            row += [_percent(entry.get("verified", {}).get(n)) for n in names]
            row += [difference_text(find_difference(entry, a, b, "verified_differences")) for a, b in pairs]
        body.append(row)
    return header, body


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"

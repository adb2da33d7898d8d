"""One fidelity run's model compared on another run's base and repeat-previous rows of the same turns.

A model trained on delta targets answers with edit scripts, but its base answers in the full form: a
second generation of the base for the delta model would only repeat the full model's run, at CPU minutes
per turn (and with --max-new-tokens for a bound, as a delta corpus records edit-script lengths only).
So the delta model's run generates the model alone (`--base none`), and its model rows are paired with
the base and repeat-previous rows of the full model's run, turn by turn on the same (trajectory, turn)
keys, through the report's own comparison (comparison.compare: paired cluster bootstrap, clusters =
trajectories). The bench `world_model` does this for every target form after the first. Pairing is only
sound when both runs scored the same turns with the same decoding, so runs that did not are refused,
with the turns that differ.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from training.fidelity.bootstrap import RESAMPLES, SEED
from training.fidelity.comparison import compare, main_score

MODEL_ROWS = "model/teacher_forced"
BASE_ROWS = "base/teacher_forced"
BASELINE_ROWS = "repeat_previous/teacher_forced"
CEILING = "real_vs_real"
ROLES = {"model": "model", "base": "base", "repeat_previous": "baseline"}
SHOWN_KEYS = 3  # turns named in a mismatch message; the counts say how many there are

Turn = tuple[str, str, int]  # (domain, trajectory_id, turn_idx)


def read_turns(run: Path) -> dict[str, list[dict]]:
    """A fidelity run's scored rows (its turns.jsonl), grouped by series ("model/teacher_forced", ...)."""
    path = run / "turns.jsonl"
    if not path.exists():
        raise ValueError(f"{path} is missing: the fidelity run did not finish")
    series: dict[str, list[dict]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            series[row["series"]].append(row)
    return dict(series)


def planned_turns(raw: str, corpus: str, trajectories: int, turns: int) -> set[Turn]:
    """The turns a fidelity run with `--real raw --held-out corpus --limit-trajectories trajectories
    --max-turns turns` generates: read from the recorded data before any model runs, so that a run that
    could not pair up is refused before it costs its CPU minutes."""
    from training.fidelity.__main__ import with_steps
    from training.fidelity.held_out import held_out_ids
    from training.fidelity.teacher_forced import turns as generated_turns

    chosen = with_steps(raw, trajectories, held_out_ids(corpus))
    return {(t.domain, t.trajectory_id, k) for t, k in generated_turns(chosen, turns)}


def turn_keys(rows: list[dict]) -> set[Turn]:
    return {(r["domain"], r["trajectory_id"], r["turn_idx"]) for r in rows}


def require_same_turns(what: str, keys: set[Turn], other_what: str, other_keys: set[Turn]) -> None:
    """ValueError naming a few turns each side has alone, when the two sets differ."""
    if keys == other_keys:
        return
    parts = []
    for name, only in ((what, keys - other_keys), (other_what, other_keys - keys)):
        if only:
            shown = ", ".join(f"{d}/{t}#{k}" for d, t, k in sorted(only)[:SHOWN_KEYS])
            parts.append(f"{len(only)} turn(s) only in {name} (e.g. {shown})")
    raise ValueError(
        f"{what} and {other_what} do not score the same turns: {'; '.join(parts)}. Both runs must hold "
        "out the same trajectories (corpora built from the same raw data with the same split settings) and "
        "generate the same number of trajectories and turns per domain (WM_EVAL_TRAJECTORIES, WM_EVAL_TURNS)"
    )


# What a reply depends on besides the model and the bound (which follows the model's own target form).
DECODING_KEYS = ("temperature", "top_p", "seed", "stop", "include_stop", "repetition_guard", "context_chars")


def require_same_decoding(first: Path, other: Path) -> None:
    """ValueError naming the settings in which two fidelity runs' decoding differs (report.json meta)."""
    a, b = (json.loads((run / "report.json").read_text())["meta"]["generation"] for run in (first, other))
    differ = [
        f"{k}: {a.get(k)!r} in {first}, {b.get(k)!r} in {other}"
        for k in DECODING_KEYS
        if a.get(k) != b.get(k)
    ]
    if differ:
        raise ValueError(f"the runs decoded differently ({'; '.join(differ)}): generate {first} again")


def scores_by_turn(rows: list[dict]) -> dict[Turn, float]:
    return {(r["domain"], r["trajectory_id"], r["turn_idx"]): main_score(r) for r in rows}


def paired_comparison(
    first: dict[str, list[dict]],
    form: dict[str, list[dict]],
    names: tuple[str, str] = ("the first form's run", "this form's run"),
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict:
    """The comparison section (comparison.compare) of `form`'s model against `first`'s base and
    repeat-previous rows, both runs' rows as read_turns gives them; `names` say which runs they are in
    errors. The form's own repeat-previous rows must score exactly as the first's: the same turns of the
    same recorded observations."""
    first_name, form_name = names
    base, baseline = first.get(BASE_ROWS, []), first.get(BASELINE_ROWS, [])
    if not base:
        raise ValueError(f"{first_name} has no base rows to pair with (was it run with --base none?)")
    if not form.get(MODEL_ROWS):
        raise ValueError(f"{form_name} has no model rows")
    model = form[MODEL_ROWS]
    require_same_turns(
        f"the model rows of {form_name}", turn_keys(model), f"the base rows of {first_name}", turn_keys(base)
    )
    require_same_turns(
        f"the model rows of {form_name}",
        turn_keys(model),
        f"the repeat-previous rows of {first_name}",
        turn_keys(baseline),
    )
    own, theirs = scores_by_turn(form.get(BASELINE_ROWS, [])), scores_by_turn(baseline)
    if own and own != theirs:
        differing = sorted(k for k in own.keys() | theirs.keys() if own.get(k) != theirs.get(k))
        raise ValueError(
            f"repeat-previous scores {len(differing)} turn(s) differently in {form_name} and {first_name} "
            f"(e.g. {differing[0]}): they did not read the same recorded observations"
        )
    systems = {"model": model, "base": base, "repeat_previous": baseline}
    comparison = compare(systems, first.get(CEILING, []), ROLES, resamples=resamples, seed=seed)
    return comparison | {"paired_with": {"run": first_name, "systems": ["base", "repeat_previous"]}}

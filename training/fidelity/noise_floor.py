"""The noise floor: what differs between two REAL runs of the same actions is volatile.

Each recorded trajectory's actions are replayed in fresh real sandboxes (replay.py). Per turn, the
recorded observation is diffed token by token against the replays' observations; every token that some
replay changed, and every place where a replay inserted text, becomes part of a volatile span (a
timestamp, a temp name). That gives a `Template` per turn that metrics.score_turn scores with.

The ceiling is fair by construction: for each replay j, template j is built from the recording and
every replay but j. Replay j scored against template j is one real-vs-real row; a model's prediction
is scored against every template j and averaged. So a prediction and a real run are judged by
templates built the same way, from the same number of runs, none of which they took part in.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from schemas.records import Trajectory
from training.fidelity.metrics import score_turn
from training.fidelity.replay import Replay
from training.observations.shapes import tokens
from training.observations.template import Span, Template


def _boundary_map(ref: list[str], other: list[str]) -> tuple[list[bool], set[int], list[int], list[int]]:
    """Tokens of `ref` that `other` changed, boundaries where it inserted text, and where each ref
    boundary lands in `other` when a volatile span starts there (before text inserted at it) and
    when one ends there (after it)."""
    changed = [False] * len(ref)
    inserted: set[int] = set()
    starts = [0] * (len(ref) + 1)
    ends = [0] * (len(ref) + 1)
    opcodes = difflib.SequenceMatcher(None, ref, other, autojunk=False).get_opcodes()
    for op, i1, i2, j1, _ in opcodes:
        if op == "equal":
            for k in range(i1, i2 + 1):
                starts[k] = ends[k] = j1 + (k - i1)
    # Changes last, so their edges win over the equal blocks they touch.
    for op, i1, i2, j1, j2 in opcodes:
        if op != "equal":
            starts[i1], ends[i2] = j1, j2
            if i1 == i2:
                inserted.add(i1)
            for k in range(i1, i2):
                changed[k] = True
    return changed, inserted, starts, ends


def volatile_template(reference: str, others: Sequence[str]) -> Template:
    """The reference cut into stable and volatile spans by diffing it against other real runs."""
    ref = tokens(reference)
    volatile = [False] * len(ref)
    inserts: set[int] = set()
    maps: list[tuple[list[str], list[int], list[int]]] = []
    for text in others:
        other = tokens(text)
        changed, inserted, starts, ends = _boundary_map(ref, other)
        volatile = [a or b for a, b in zip(volatile, changed, strict=True)]
        inserts.update(inserted)
        maps.append((other, starts, ends))
    # Units in order: a zero-width insertion point before token i, then token i.
    spans: list[Span] = []
    start: int | None = None  # boundary where the current volatile run began

    def close(end: int) -> None:
        nonlocal start
        assert start is not None
        variants = ["".join(other[starts[start] : ends[end]]) for other, starts, ends in maps]
        spans.append(Span("".join(ref[start:end]), volatile=True, variants=variants))
        start = None

    for i in range(len(ref) + 1):
        if i in inserts and start is None:
            start = i
        if i == len(ref):
            break
        if volatile[i]:
            if start is None:
                start = i
        else:
            if start is not None:
                close(i)
            if spans and not spans[-1].volatile:
                spans[-1].text += ref[i]
            else:
                spans.append(Span(ref[i]))
    if start is not None:
        close(len(ref))
    return Template(spans or [Span("")], others=list(others))


@dataclass
class NoiseFloor:
    """Per (trajectory id, turn index 1-based): the leave-one-out templates (one per replay that
    reached the turn) and the real-vs-real score rows. A turn without replays has no entry and is
    scored against its recorded text alone."""

    templates: dict[tuple[str, int], list[Template]] = field(default_factory=dict)
    real_vs_real: list[dict] = field(default_factory=list)

    def templates_for(self, trajectory: Trajectory, turn_idx: int) -> list[Template]:
        found = self.templates.get((trajectory.trajectory_id, turn_idx))
        return found or [Template.stable(trajectory.steps[turn_idx - 1].observation.text)]

    def volatile_share(self, trajectory: Trajectory, turn_idx: int) -> float:
        shares = [t.volatile_share for t in self.templates_for(trajectory, turn_idx)]
        return sum(shares) / len(shares)

    def summary(self) -> dict:
        per_turn = {key: sum(t.volatile_share for t in ts) / len(ts) for key, ts in self.templates.items()}
        spans = [s for ts in self.templates.values() for t in ts for s in t.volatile_spans]
        examples: dict[str, list[str]] = {}
        for span in spans:
            key = span.text.strip() or repr(span.text)
            if key not in examples and len(examples) < 12:
                examples[key] = sorted({v.strip() or repr(v) for v in span.variants})[:3]
        shares = sorted(per_turn.values())
        return {
            "turns": len(per_turn),
            "turns_with_volatile": sum(
                1 for ts in self.templates.values() if any(t.volatile_spans for t in ts)
            ),
            "volatile_spans": len(spans),
            "volatile_share_mean": sum(shares) / len(shares) if shares else 0.0,
            "volatile_share_max": shares[-1] if shares else 0.0,
            "turns_over_half_volatile": sum(1 for v in shares if v > 0.5),
            "examples": examples,
        }


def build_noise_floor(
    trajectories: Sequence[Trajectory],
    replays: dict[str, list[Replay]],
    max_turns: int | None = None,
) -> NoiseFloor:
    """Leave-one-out templates from every real run of each turn, and the real-vs-real rows."""
    floor = NoiseFloor()
    for t in trajectories:
        runs = replays.get(t.trajectory_id, [])
        for k, step in enumerate(t.steps[:max_turns], start=1):
            real = step.observation.text
            others = [r.observations[k - 1] for r in runs if len(r.observations) >= k]
            if not others:
                continue
            held_out = [volatile_template(real, others[:j] + others[j + 1 :]) for j in range(len(others))]
            floor.templates[(t.trajectory_id, k)] = held_out
            share = sum(h.volatile_share for h in held_out) / len(held_out)
            for j, (replayed, template) in enumerate(zip(others, held_out, strict=True)):
                row = score_turn(t.domain, replayed, template).as_dict()
                row.update(domain=t.domain, trajectory_id=t.trajectory_id, turn_idx=k, replay=j)
                row.update(volatile_share=share, prediction=replayed)
                floor.real_vs_real.append(row)
    return floor


def default_workers() -> int:
    """Real sandboxes are CPU-bound on small machines: at most one per core, at most four."""
    return max(1, min(4, os.cpu_count() or 1))

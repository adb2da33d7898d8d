"""The noise floor: what differs between two REAL runs of the same actions is volatile.

Each recorded trajectory's actions are replayed in fresh real sandboxes (the recorded task's setup,
then the actions one by one). Per turn, the recorded observation is diffed token by token against the
replays' observations; every token that some replay changed, and every place where a replay inserted
text, becomes part of a volatile span (a timestamp, a temp name). The result is a `Template` per turn
that metrics.score_turn scores predictions with, plus the real-vs-real agreement: each replay scored
against a template built WITHOUT it, the achievable ceiling for a simulator.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from sandboxes.base import SandboxError
from sandboxes.terminal import TerminalConfig, TerminalSandbox, make_backend
from schemas.records import Action, Task, Trajectory
from training.fidelity.metrics import Span, Template, score_turn, tokens

log = logging.getLogger(__name__)

REPLAYABLE_DOMAINS = ("terminal",)


@dataclass
class Replay:
    trajectory_id: str
    replay: int
    observations: list[str]  # one per replayed turn; shorter than asked when `error` stopped it
    error: str = ""

    def as_dict(self) -> dict:
        return {
            "trajectory_id": self.trajectory_id,
            "replay": self.replay,
            "observations": self.observations,
            "error": self.error,
        }


def replay_actions(sandbox: TerminalSandbox, task: Task, actions: Sequence[Action]) -> tuple[list[str], str]:
    """Run `actions` after a fresh reset to `task`: the observation texts, and an error that cut it short."""
    observations: list[str] = []
    try:
        sandbox.reset(task)
        for action in actions:
            observations.append(sandbox.step(action).observation.text)
    except SandboxError as exc:  # an invalid action or a crash ends this replay, not the run
        return observations, f"{type(exc).__name__}: {exc}"
    return observations, ""


class ReplayStore:
    """Finished replays as JSONL lines, so a rerun (or a resumed, killed run) does not replay again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.done: dict[tuple[str, int], Replay] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line torn by a kill is replayed again
                self.done[(row["trajectory_id"], row["replay"])] = Replay(**row)

    def add(self, replay: Replay) -> None:
        with self._lock:
            self.done[(replay.trajectory_id, replay.replay)] = replay
            with self.path.open("a") as f:
                f.write(json.dumps(replay.as_dict()) + "\n")


def run_replays(
    trajectories: Sequence[Trajectory],
    replays: int,
    store: ReplayStore,
    *,
    backend: str = "bwrap",
    max_turns: int | None = None,
    workers: int = 2,
    progress: bool = True,
) -> dict[str, list[Replay]]:
    """Replay each trajectory `replays` times, each in a fresh environment; replays per trajectory id."""
    jobs = [
        (t, r)
        for t in trajectories
        if t.domain in REPLAYABLE_DOMAINS
        for r in range(replays)
        if (t.trajectory_id, r) not in store.done
    ]
    local = threading.local()
    made: list[TerminalSandbox] = []
    made_lock = threading.Lock()

    def sandbox() -> TerminalSandbox:
        # One sandbox per worker thread: reset gives each replay a fresh environment anyway.
        if getattr(local, "sandbox", None) is None:
            local.sandbox = TerminalSandbox(TerminalConfig(backend=make_backend(backend)))
            with made_lock:
                made.append(local.sandbox)
        return local.sandbox

    def work(t: Trajectory, r: int) -> Replay:
        actions = [s.action for s in t.steps[:max_turns]]
        observations, error = replay_actions(sandbox(), t.task, actions)
        return Replay(t.trajectory_id, r, observations, error)

    try:
        with ThreadPoolExecutor(max(1, workers), thread_name_prefix="replay") as pool:
            futures = [pool.submit(work, t, r) for t, r in jobs]
            for future in tqdm(
                as_completed(futures), total=len(futures), desc="real replays", disable=not progress
            ):
                replay = future.result()
                if replay.error:
                    log.warning("replay %s/%d stopped: %s", replay.trajectory_id, replay.replay, replay.error)
                store.add(replay)
    finally:
        for sb in made:
            sb.close()
    found: dict[str, list[Replay]] = {}
    for (tid, _), replay in sorted(store.done.items()):
        found.setdefault(tid, []).append(replay)
    return found


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
    return Template(spans or [Span("")])


@dataclass
class NoiseFloor:
    """Per (trajectory id, turn index 1-based): the template, and the real-vs-real score rows."""

    templates: dict[tuple[str, int], Template] = field(default_factory=dict)
    real_vs_real: list[dict] = field(default_factory=list)
    runs_per_turn: dict[tuple[str, int], int] = field(default_factory=dict)

    def template(self, trajectory: Trajectory, turn_idx: int) -> Template:
        found = self.templates.get((trajectory.trajectory_id, turn_idx))
        return found or Template.stable(trajectory.steps[turn_idx - 1].observation.text)

    def summary(self) -> dict:
        spans = [s for t in self.templates.values() for s in t.volatile_spans]
        with_volatile = sum(1 for t in self.templates.values() if t.volatile_spans)
        volatile_chars = sum(len(s.text) for s in spans)
        total_chars = sum(len(t.text) for t in self.templates.values())
        examples: dict[str, list[str]] = {}
        for span in spans:
            key = span.text.strip() or repr(span.text)
            if key not in examples and len(examples) < 12:
                examples[key] = sorted({v.strip() or repr(v) for v in span.variants})[:3]
        return {
            "turns": len(self.templates),
            "turns_with_volatile": with_volatile,
            "volatile_spans": len(spans),
            "volatile_char_share": volatile_chars / total_chars if total_chars else 0.0,
            "examples": examples,
        }


def build_noise_floor(
    trajectories: Sequence[Trajectory],
    replays: dict[str, list[Replay]],
    max_turns: int | None = None,
) -> NoiseFloor:
    """Templates from every real run of each turn; real-vs-real rows from leave-one-out templates."""
    floor = NoiseFloor()
    for t in trajectories:
        runs = replays.get(t.trajectory_id, [])
        for k, step in enumerate(t.steps[:max_turns], start=1):
            real = step.observation.text
            others = [r.observations[k - 1] for r in runs if len(r.observations) >= k]
            floor.templates[(t.trajectory_id, k)] = volatile_template(real, others)
            floor.runs_per_turn[(t.trajectory_id, k)] = 1 + len(others)
            for j, replayed in enumerate(others):
                held_out = volatile_template(real, others[:j] + others[j + 1 :])
                row = score_turn(t.domain, replayed, held_out).as_dict()
                row.update(domain=t.domain, trajectory_id=t.trajectory_id, turn_idx=k, replay=j)
                floor.real_vs_real.append(row)
    return floor


def default_workers() -> int:
    """Real sandboxes are CPU-bound on small machines: at most one per core, at most four."""
    return max(1, min(4, os.cpu_count() or 1))

"""RL prompts from the corpus: one turn per trajectory, as the reference system trained GSPO (expanding
every turn of a trajectory into a sample collapsed its reward: the late turns of one trajectory are
near-copies of each other and dominate the batch).

The RL corpus (`build_corpus --emit rl`) holds one JSON line per turn under OUT/rl/<split>/: the chat
messages the world model sees, the real observation and the action. The turn kept per trajectory is
drawn with a seeded hash of the trajectory id, preferring turns that are not echo turns, so a rerun
with the same seed trains on the same prompts.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import fsspec

FIELDS = ("prompt", "domain", "reference", "action_text", "sample_id")


@dataclass(frozen=True)
class RLSample:
    sample_id: str
    trajectory_id: str
    domain: str
    prompt: list[dict]  # system, (user, assistant)*, user
    reference: str  # the real observation's text
    action_text: str

    def row(self) -> dict:
        return {f: getattr(self, f) for f in FIELDS}


def read_records(corpus: str, split: str) -> Iterable[dict]:
    """Every RL record of `split` under the corpus root (or its rl/ folder), in file order."""
    fs, root = fsspec.core.url_to_fs(corpus)
    root = root.rstrip("/")
    folder = f"{root}/rl/{split}" if fs.isdir(f"{root}/rl") else f"{root}/{split}"
    files = sorted(fs.glob(f"{folder}/*.jsonl"))
    if not files:
        raise FileNotFoundError(
            f"no RL prompts in {folder}: build the corpus with `build_corpus --emit rl` "
            "(the default emits it)"
        )
    for path in files:
        with fs.open(path, "rt") as f:
            for number, line in enumerate(f, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError as exc:
                        raise ValueError(f"{path}:{number}: not a JSON line ({exc})") from exc


def _draw(trajectory_id: str, turn_idx: int, seed: int) -> bytes:
    return hashlib.blake2b(f"{seed}:{trajectory_id}:{turn_idx}".encode(), digest_size=8).digest()


def one_turn_per_trajectory(
    records: Iterable[dict],
    seed: int = 0,
    fits: Callable[[list[dict]], bool] | None = None,
    domains: Iterable[str] | None = None,
) -> list[RLSample]:
    """One sample per trajectory, in trajectory-id order. `fits(messages)` rules out prompts too long to
    train on; a trajectory with no turn that fits contributes nothing. `domains` keeps only those."""
    wanted = set(domains) if domains else None
    turns: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        if wanted is None or record["domain"] in wanted:
            turns[record["trajectory_id"]].append(record)
    samples = []
    for trajectory_id in sorted(turns):
        candidates = [r for r in turns[trajectory_id] if fits is None or fits(r["messages"])]
        if not candidates:
            continue
        # echo turns (the observation repeats the action) teach little: draw among the others first
        pool = [r for r in candidates if not r.get("echo")] or candidates
        chosen = min(pool, key=lambda r: _draw(trajectory_id, r["turn_idx"], seed))
        samples.append(
            RLSample(
                sample_id=chosen["id"],
                trajectory_id=trajectory_id,
                domain=chosen["domain"],
                prompt=chosen["messages"],
                reference=chosen["reference"],
                action_text=(chosen.get("action") or {}).get("text") or "",
            )
        )
    return samples

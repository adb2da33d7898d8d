"""The corpus benchmark's input: N trajectories derived from ~200 real ones, built once and cached.

Recording 20,000 trajectories takes hours, so the benchmark records a few hundred with the real
terminal collector (bubblewrap sandboxes) and derives the rest from them:

- variant 0 of each real trajectory is the recording itself;
- variant v >= 1 gets new trajectory and task ids (`<id>-vNNNNN`, so splits spread over many tasks) and
  a consistent rewrite of its text: with a map seeded by (v, trajectory id), about half of the distinct
  words (letters first, 3+ characters) become other words of the real corpus' vocabulary and every
  run of digits becomes other digits of the same length. The same word gets the same replacement in
  every text, action argument and observation of that trajectory, so a variant is still a coherent
  session (a file created in step 2 is listed under its new name in step 5), and echo turns, errors
  and prompts keep their structure. With half of the words changed, few 5-word shingles survive, so
  neither exact nor near-duplicate detection collapses variants onto their source.

Everything is a pure function of the recordings and N: the same cache is rebuilt byte for byte.
Written with `schemas.TrajectoryWriter`; cached under /var/tmp/agentworld-bench (outside the repo).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from typing import Any

import xxhash

from schemas import Trajectory, TrajectoryWriter, read_trajectories

CACHE = os.environ.get("AGENTWORLD_BENCH_CACHE", "/var/tmp/agentworld-bench")
RECORDED = 200
_WORD = re.compile(r"[A-Za-z][A-Za-z_]{2,}|\d+")


def collect_real(root: str, episodes: int = RECORDED) -> str:
    """Record `episodes` real terminal trajectories once (bubblewrap sandboxes); return the dataset root."""
    done = os.path.join(root, "summary.json")
    if os.path.exists(done):
        return root
    shutil.rmtree(root, ignore_errors=True)
    cmd = [
        sys.executable, "-m", "collectors.terminal", "--sandboxes", "4", "--episodes", str(episodes),
        "--max-steps", "12", "--backend", "bwrap", "--out", root, "--no-progress",
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    return root


def vocabulary(trajectories: list[Trajectory]) -> list[str]:
    words: set[str] = set()
    for t in trajectories:
        for text in (t.initial_observation.text, *(s.observation.text for s in t.steps)):
            words.update(w for w in _WORD.findall(text) if not w.isdigit())
    return sorted(words)


class _Rewriter:
    """One variant's consistent word and number map."""

    def __init__(self, seed: str, vocab: list[str]) -> None:
        self._seed = seed.encode()
        self._vocab = vocab
        self._map: dict[str, str] = {}

    def _replacement(self, word: str) -> str:
        h = xxhash.xxh64_intdigest(self._seed + b"\0" + word.encode())
        if word.isdigit():
            digits = str(h % 10 ** len(word)).zfill(len(word))
            return digits if len(word) == 1 or word[0] != "0" else "0" + digits[1:]
        if h & 1:
            return word
        return self._vocab[(h >> 1) % len(self._vocab)]

    def sub(self, text: str) -> str:
        def swap(m: re.Match[str]) -> str:
            word = m.group()
            new = self._map.get(word)
            if new is None:
                new = self._map[word] = self._replacement(word)
            return new

        return _WORD.sub(swap, text)

    def json(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.sub(value)
        if isinstance(value, dict):
            return {k: self.json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v) for v in value]
        return value


def derive(t: Trajectory, v: int, vocab: list[str]) -> Trajectory:
    """Variant `v` of `t` (v = 0: `t` itself)."""
    if v == 0:
        return t
    r = _Rewriter(f"{v}:{t.trajectory_id}", vocab)
    out = copy.deepcopy(t)
    out.trajectory_id = f"{t.trajectory_id}-v{v:05d}"
    out.task = replace(
        out.task,
        id=f"{t.task.id}-v{v:05d}",
        instruction=r.sub(t.task.instruction),
        setup=r.json(t.task.setup),
    )
    out.initial_observation.text = r.sub(t.initial_observation.text)
    for step in out.steps:
        step.action.text = r.sub(step.action.text)
        step.action.arguments = r.json(step.action.arguments)
        step.observation.text = r.sub(step.observation.text)
        step.observation.data = r.json(step.observation.data)
    return out


def build_corpus(n: int, cache: str = CACHE) -> str:
    """The dataset root of an n-trajectory corpus (built on first use)."""
    root = os.path.join(cache, f"corpus-{n}")
    marker = os.path.join(root, "corpus.json")
    if os.path.exists(marker):
        return root
    real_root = collect_real(os.path.join(cache, f"raw{RECORDED}"))
    real = sorted(read_trajectories(real_root), key=lambda t: t.trajectory_id)
    vocab = vocabulary(real)
    shutil.rmtree(root, ignore_errors=True)
    with TrajectoryWriter(root, writer_id="bench") as writer:
        for i in range(n):
            writer.write(derive(real[i % len(real)], i // len(real), vocab))
    info = {"trajectories": n, "recorded": len(real), "vocabulary": len(vocab), "source": real_root}
    with open(marker, "w") as f:
        json.dump(info, f, indent=1)
    return root


if __name__ == "__main__":
    print(build_corpus(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000))

"""Stage 6: assign each trajectory to train/validation/test by a stable hash of its task id, and
optionally drop training trajectories whose observations appear in an evaluation set.

The split depends only on (seed, task.id), so every trajectory of a task lands in the same split
on every run and every worker. Decontamination loads the evaluation file in `DoFn.setup` from a
path or URI every worker can read (nothing is shipped from the driver): an AgentWorldBench JSONL
file (its `response` observations), a glob or directory of them, or a trajectory dataset.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterator

import apache_beam as beam
from fsspec.core import url_to_fs

from beam_pipelines.dead_letter import DEAD_LETTER, OK, DeadLetter, count
from beam_pipelines.text import normalise_text
from schemas import Trajectory, read_trajectories

STAGE = "split"
SPLITS = ("train", "validation", "test")
_OBSERVATION_HEADER = "**Environment Observation:**"
# Observations shorter than this (a bare prompt, "OK") occur everywhere; matching them says
# nothing about contamination.
MIN_MATCH_CHARS = 32


def split_of(task_id: str, ratios: tuple[float, ...], seed: str) -> str:
    digest = hashlib.sha256(f"{seed}\0{task_id}".encode()).digest()
    position = int.from_bytes(digest[:8], "big") / 2**64
    bound = 0.0
    for name, ratio in zip(SPLITS, ratios, strict=True):
        bound += ratio
        if position < bound:
            return name
    return SPLITS[-1]  # rounding: ratios summing to 1 - epsilon


def observation_fingerprint(text: str) -> bytes | None:
    """A hash of an observation's normalised text, the same for a trajectory's observation and its
    AgentWorldBench response; None for texts too short to mean anything."""
    if text.startswith(_OBSERVATION_HEADER):
        text = text[len(_OBSERVATION_HEADER) :]
    text = normalise_text(text, screen=True).strip()
    if len(text) < MIN_MATCH_CHARS:
        return None
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _jsonl_files(path: str) -> list[str] | None:
    """The JSONL files `path` designates, or None when it designates a trajectory dataset."""
    fs, local = url_to_fs(path)
    if set("*?[") & set(local):
        files = fs.glob(local)
    elif fs.isdir(local):
        files = [p for p in fs.find(local) if p.endswith(".jsonl")]
    else:
        files = [local]
    jsonl = sorted(fs.unstrip_protocol(p) for p in files if p.endswith(".jsonl"))
    return jsonl or None


def load_eval_fingerprints(path: str) -> set[bytes]:
    fingerprints: set[bytes] = set()
    files = _jsonl_files(path)
    if files is None:
        texts = (step.observation.text for t in read_trajectories(path) for step in t.steps)
    else:
        texts = (response for file in files for response in _responses(file))
    for text in texts:
        fingerprint = observation_fingerprint(text)
        if fingerprint is not None:
            fingerprints.add(fingerprint)
    return fingerprints


def _responses(file: str) -> Iterator[str]:
    fs, local = url_to_fs(file)
    with fs.open(local, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{posixpath.basename(file)} line {number}: not JSON: {exc}") from None
            yield from (text for text in sample.get("response", []) if isinstance(text, str))


class _Split(beam.DoFn):
    def __init__(self, ratios: tuple[float, ...], seed: str, decontaminate_against: str | None) -> None:
        self._ratios, self._seed, self._eval_path = ratios, seed, decontaminate_against

    def setup(self) -> None:
        self._eval = load_eval_fingerprints(self._eval_path) if self._eval_path else set()

    def process(self, t: Trajectory) -> Iterator[object]:
        split = split_of(t.task.id, self._ratios, self._seed)
        if split == "train" and self._eval:
            for step in t.steps:
                if observation_fingerprint(step.observation.text) in self._eval:
                    count(STAGE, "contaminated")
                    detail = f"step {step.index} observation appears in {self._eval_path}"
                    yield beam.pvalue.TaggedOutput(
                        DEAD_LETTER, DeadLetter(STAGE, "contaminated", detail, trajectory_id=t.trajectory_id)
                    )
                    return
        count(STAGE, split)
        yield split, t


class SplitTrajectories(beam.PTransform):
    """Trajectory -> {"ok": (split name, Trajectory), "dead_letter": DeadLetter(reason="contaminated")}.

    ratios: fractions for ("train", "validation", "test"), summing to 1. seed: changes the
    assignment. decontaminate_against: an evaluation file/dataset path or URI (see module doc).
    """

    def __init__(
        self,
        ratios: tuple[float, float, float] = (0.98, 0.01, 0.01),
        seed: str = "v1",
        decontaminate_against: str | None = None,
    ) -> None:
        super().__init__()
        if len(ratios) != len(SPLITS) or min(ratios) < 0 or abs(sum(ratios) - 1.0) > 1e-6:
            raise ValueError(f"ratios must be {len(SPLITS)} fractions >= 0 summing to 1, got {ratios}")
        self._ratios, self._seed, self._eval_path = tuple(ratios), seed, decontaminate_against

    def expand(self, trajectories: beam.PCollection) -> dict[str, beam.PCollection]:
        split = _Split(self._ratios, self._seed, self._eval_path)
        results = trajectories | "Split" >> beam.ParDo(split).with_outputs(DEAD_LETTER, main=OK)
        return {OK: results[OK], DEAD_LETTER: results[DEAD_LETTER]}

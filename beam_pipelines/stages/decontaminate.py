"""Stage 6b (after Split): n-gram decontamination of the corpus against benchmark files.

Metric. Every benchmark turn text (each `prompt` action and each `response` observation of an
AgentWorldBench sample, its `### Turn k` / `**Action:**` / `**Environment Observation:**` header
removed) is cut into word n-grams (`beam_pipelines.ngrams`: normalised, lowercased, punctuation-blind
words, n = 13 by default). A trajectory's *coverage* of a turn is the share of the turn's distinct
n-grams that occur anywhere in the trajectory's texts (initial observation, every action, every
observation). The trajectory is contaminated when some turn's coverage is >= the threshold (0.5 by
default). A benchmark observation pasted inside a longer screen is therefore caught, while a
trajectory that only shares boilerplate lines with a turn is not. Turns with fewer than n words have
no n-gram and are skipped; the report counts them per source.

Sources (`--decontaminate`, repeatable or comma-separated), each a path or URI:
- an AgentWorldBench JSONL file (fields `task`, `id`, `prompt`, `response`, `current_prompt`,
  `turn_idx`, ...; format of the public AgentWorldBench release, as DESIGN.md section 2 describes),
  a `.json` file holding one such sample or a list of them, or a glob or directory of them;
- a trajectory dataset (a directory or Parquet file written by `schemas.TrajectoryWriter`): its
  initial observation (turn 0), actions and observations;
- any other file: plain text, each blank-line-separated paragraph one turn.

Actions. In `drop` mode a contaminated trajectory goes to OUT/dead_letter/decontaminate.jsonl with
reason `contaminated`; in `flag` mode it stays in the corpus unchanged. Either way it gets one line
in OUT/decontamination/matches.jsonl (its id, domain, split, the action taken and the matching
benchmark sample ids, turns and coverages, best first, at most `MAX_MATCHES`): downstream users of a
flagged corpus filter on those trajectory ids. Counters `decontaminate/<domain>.checked|flagged|
dropped`, `decontaminate/origin=<dataset>.checked|flagged|dropped` (the public dataset an imported
trajectory came from, `captured` for our own) and `decontaminate/source=<source>.flagged|dropped`
go to the report, and
OUT/decontamination/benchmark.json records what each source gave the index.

Scale. The driver builds the index once while the pipeline is constructed (`expand`), from the
benchmark files, and writes it to OUT/.decontamination/index.pkl (removed after the run); each worker
process loads it once (`apache_beam.utils.shared.Shared`, so DoFn instances on several threads share
one copy). Per trajectory the work is one hashing pass over its distinct texts and a vectorised
lookup (`BenchmarkIndex.coverage`). Only the splits named in `splits` are checked (train by default).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.utils.shared import Shared
from fsspec.core import url_to_fs

from beam_pipelines.dead_letter import DEAD_LETTER, OK, DeadLetter, count
from beam_pipelines.ngrams import DEFAULT_NGRAM, BenchmarkIndex, IndexBuilder, TurnRef, ngram_set
from beam_pipelines.stages.write import lines_stats
from schemas import Trajectory, read_trajectories
from schemas.atomic import atomic_open, atomic_write

STAGE = "decontaminate"
MATCHES = "matches"
MODES = ("drop", "flag")
OUTPUT_DIR = "decontamination"
MATCHES_FILE = f"{OUTPUT_DIR}/matches.jsonl"
SUMMARY_FILE = f"{OUTPUT_DIR}/benchmark.json"
INDEX_DIR = ".decontamination"
MAX_MATCHES = 10  # benchmark references listed per contaminated trajectory
_HEADER = re.compile(
    r"\A\s*(?:#+\s*Turn\s+\d+\s*)?(?:\**\s*(?:Action|Environment\s+Observation)\s*:?\s*\**\s*:?)?",
    re.IGNORECASE,
)
_PARAGRAPH = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class DecontaminationConfig:
    sources: tuple[str, ...]
    ngram: int = DEFAULT_NGRAM
    threshold: float = 0.5
    mode: str = "drop"
    splits: tuple[str, ...] = ("train",)

    def __post_init__(self) -> None:
        if not self.sources:
            raise ValueError("give at least one benchmark source to decontaminate against")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")
        if self.ngram < 1:
            raise ValueError(f"n-gram length must be at least 1, got {self.ngram}")

    def manifest_view(self) -> dict:
        """The settings, with source file names but not their machine-specific directories."""
        return {
            "ngram": self.ngram,
            "threshold": self.threshold,
            "mode": self.mode,
            "splits": list(self.splits),
            "sources": [posixpath.basename(s.rstrip("/")) for s in self.sources],
        }


def strip_turn_header(text: str) -> str:
    """`text` without a leading `### Turn k`, `**Action:**` or `**Environment Observation:**`."""
    return _HEADER.sub("", text, count=1)


# --- reading the sources ------------------------------------------------------------------------


def _files(source: str) -> tuple[list[str], bool]:
    """(files, is_dataset): the files `source` names, or ([source], True) for a trajectory dataset."""
    fs, local = url_to_fs(source)
    if set("*?[") & set(local):
        files = sorted(fs.glob(local))
        if not files:
            raise FileNotFoundError(f"--decontaminate {source}: the glob matches no file")
    elif fs.isdir(local):
        found = sorted(fs.find(local))
        if any(p.endswith(".parquet") for p in found):
            return [source], True  # a dataset directory (Parquet files, maybe partitioned)
        files = [p for p in found if p.endswith(".jsonl")]
        if not files:
            raise FileNotFoundError(
                f"--decontaminate {source}: no AgentWorldBench .jsonl file and no trajectory Parquet under it"
            )
    elif fs.exists(local):
        files = [local]
    else:
        raise FileNotFoundError(f"--decontaminate {source}: no such file or directory")
    if all(p.endswith(".parquet") for p in files):
        return [fs.unstrip_protocol(p) for p in files], True
    return [fs.unstrip_protocol(p) for p in files], False


def _samples(file: str) -> Iterator[tuple[int, dict]]:
    fs, local = url_to_fs(file)
    with fs.open(local, "rt", encoding="utf-8") as f:
        if file.endswith(".json"):
            value = json.load(f)
            yield from enumerate(value if isinstance(value, list) else [value], 1)
            return
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except ValueError as exc:
                    raise ValueError(f"{file} line {number}: not JSON: {exc}") from None


def _add_agentworldbench(builder: IndexBuilder, source: int, file: str) -> None:
    for number, sample in _samples(file):
        prompts = sample.get("prompt") if isinstance(sample, dict) else None
        responses = sample.get("response") if isinstance(sample, dict) else None
        if not isinstance(prompts, list) or not isinstance(responses, list):
            raise ValueError(
                f"{file} sample {number}: not an AgentWorldBench sample (it needs `prompt` and `response` "
                "lists); give a JSONL file in that format, a trajectory dataset, or a plain-text file"
            )
        sample_id, domain = (
            str(sample.get("id", f"{posixpath.basename(file)}:{number}")),
            sample.get("task", ""),
        )
        builder.sources[source].samples += 1
        turns = [(k, "action", text) for k, text in enumerate(prompts, 1)]
        turns += [(k, "observation", text) for k, text in enumerate(responses, 1)]
        current = sample.get("current_prompt")
        if isinstance(current, str) and current not in prompts:
            turns.append((int(sample.get("turn_idx") or len(prompts) + 1), "action", current))
        for k, kind, text in turns:
            if isinstance(text, str):
                builder.add(strip_turn_header(text), TurnRef(source, sample_id, k, kind, str(domain)))


def _add_dataset(builder: IndexBuilder, source: int, path: str) -> None:
    for t in read_trajectories(path):
        builder.sources[source].samples += 1
        builder.add(t.initial_observation.text, TurnRef(source, t.trajectory_id, 0, "observation", t.domain))
        for step in t.steps:
            k = step.index + 1
            builder.add(step.action.text, TurnRef(source, t.trajectory_id, k, "action", t.domain))
            builder.add(step.observation.text, TurnRef(source, t.trajectory_id, k, "observation", t.domain))


def _add_text(builder: IndexBuilder, source: int, file: str) -> None:
    fs, local = url_to_fs(file)
    with fs.open(local, "rt", encoding="utf-8") as f:
        paragraphs = [p for p in _PARAGRAPH.split(f.read()) if p.strip()]
    builder.sources[source].samples += 1
    for k, paragraph in enumerate(paragraphs, 1):
        builder.add(paragraph, TurnRef(source, posixpath.basename(file), k, "text", ""))


def build_index(sources: tuple[str, ...], n: int = DEFAULT_NGRAM) -> BenchmarkIndex:
    """The index of every turn text of `sources` (see the module doc for what a source may be)."""
    builder = IndexBuilder(n)
    for source in sources:
        index = builder.add_source(source)
        files, is_dataset = _files(source)
        for file in files:
            if is_dataset:
                _add_dataset(builder, index, file)
            elif file.endswith((".jsonl", ".json")):
                _add_agentworldbench(builder, index, file)
            else:
                _add_text(builder, index, file)
    return builder.build()


def index_summary(index: BenchmarkIndex, config: DecontaminationConfig) -> dict:
    """OUT/decontamination/benchmark.json: the settings and what each source gave the index."""
    return {
        **config.manifest_view(),
        "distinct_turns": len(index.turn_ngrams),
        "distinct_ngrams": len(index.hashes),
        "index_bytes": index.nbytes,
        "by_source": [s.to_json() for s in index.sources],
    }


def write_index(config: DecontaminationConfig, output: str) -> str:
    """Build the index (driver side), write it and its summary under `output`; return its path."""
    index = build_index(config.sources, config.ngram)
    path = posixpath.join(output, INDEX_DIR, "index.pkl")
    atomic_write(path, index.dumps())
    atomic_write(
        posixpath.join(output, SUMMARY_FILE), json.dumps(index_summary(index, config), indent=1) + "\n"
    )
    return path


def remove_index(output: str) -> None:
    fs, root = url_to_fs(posixpath.join(output, INDEX_DIR))
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _load_index(path: str) -> BenchmarkIndex:
    fs, local = url_to_fs(path)
    with fs.open(local, "rb") as f:
        return BenchmarkIndex.loads(f.read())


# --- the stage ----------------------------------------------------------------------------------


def trajectory_texts(t: Trajectory) -> Iterator[str]:
    yield t.initial_observation.text
    for step in t.steps:
        yield step.action.text
        yield step.observation.text


def match_record(
    t: Trajectory, split: str, action: str, found: list[tuple[int, float]], index: BenchmarkIndex
) -> dict:
    matches = []
    for turn, coverage in found:
        for ref in index.refs[turn]:
            if len(matches) == MAX_MATCHES:
                break
            matches.append(
                {
                    "source": index.sources[ref.source].label,
                    "id": ref.sample_id,
                    "domain": ref.domain,
                    "turn": ref.turn,
                    "kind": ref.kind,
                    "coverage": round(coverage, 4),
                }
            )
    return {
        "trajectory_id": t.trajectory_id,
        "task_id": t.task.id,
        "domain": t.domain,
        "split": split,
        "action": action,
        "coverage": round(found[0][1], 4),
        "contaminating_turns": len(found),
        "matches": matches,
    }


class _Decontaminate(beam.DoFn):
    def __init__(self, index_path: str, config: DecontaminationConfig) -> None:
        self._index_path, self._config = index_path, config
        self._shared = Shared()

    def setup(self) -> None:
        # one copy per worker process, whatever the number of DoFn instances (threads) in it
        self._index = self._shared.acquire(lambda: _load_index(self._index_path), tag=self._index_path)

    def process(self, pair: tuple[str, Trajectory]) -> Iterator[object]:
        split, t = pair
        if split not in self._config.splits:
            yield pair
            return
        origin = t.provenance.source.dataset if t.provenance.source else "captured"
        count(STAGE, f"{t.domain}.checked")
        count(STAGE, f"origin={origin}.checked")
        found = self._index.contaminating(
            ngram_set(trajectory_texts(t), self._index.n), self._config.threshold
        )
        if not found:
            yield pair
            return
        action = "dropped" if self._config.mode == "drop" else "flagged"
        record = match_record(t, split, action, found, self._index)
        count(STAGE, f"{t.domain}.{action}")
        count(STAGE, f"origin={origin}.{action}")
        for label in dict.fromkeys(m["source"] for m in record["matches"]):
            count(STAGE, f"source={label}.{action}")
        yield beam.pvalue.TaggedOutput(MATCHES, record)
        if action == "flagged":
            yield pair
            return
        best = record["matches"][0]
        detail = (
            f"{best['coverage']:.0%} of the {self._index.n}-grams of {best['kind']} turn {best['turn']} of "
            f"{best['id']} ({best['source']}) occur in it"
        )
        yield beam.pvalue.TaggedOutput(
            DEAD_LETTER, DeadLetter(STAGE, "contaminated", detail, trajectory_id=t.trajectory_id)
        )


class _WriteMatches(beam.DoFn):
    def __init__(self, root: str) -> None:
        self._root = root

    def process(self, records: list[dict]) -> Iterator[dict]:
        lines = sorted(json.dumps(r, ensure_ascii=False) for r in records)
        with atomic_open(posixpath.join(self._root, MATCHES_FILE)) as f:
            f.write("".join(f"{line}\n" for line in lines).encode())
        yield lines_stats(MATCHES_FILE, len(lines))


class DecontaminateTrajectories(beam.PTransform):
    """(split, Trajectory) -> {"ok": (split, Trajectory), "dead_letter": DeadLetter(reason="contaminated"),
    "matches": file stats of OUT/decontamination/matches.jsonl (always written, empty when clean)}.

    Building the pipeline builds the benchmark index from `config.sources` and writes it under
    `output` (see the module doc); `remove_index(output)` deletes it after the run.
    """

    def __init__(self, config: DecontaminationConfig, output: str) -> None:
        super().__init__()
        self._config, self._output = config, output

    def expand(self, pairs: beam.PCollection) -> dict[str, beam.PCollection]:
        index_path = write_index(self._config, self._output)
        results = pairs | "Check" >> beam.ParDo(_Decontaminate(index_path, self._config)).with_outputs(
            DEAD_LETTER, MATCHES, main=OK
        )
        written = (
            results[MATCHES]
            | "CollectMatches" >> beam.combiners.ToList()
            | "WriteMatches" >> beam.ParDo(_WriteMatches(self._output))
        )
        return {OK: results[OK], DEAD_LETTER: results[DEAD_LETTER], MATCHES: written}

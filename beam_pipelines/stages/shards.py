"""Format -> Tokenise -> Pack -> Write, fused per output shard: the corpus files from parked trajectories.

What a corpus stage produces grows with the square of a trajectory's length (every SFT sample and RL
prompt repeats the history before it), and trajectories themselves are large, so neither crosses a
shuffle. Only `Parked` references are grouped, by output shard (split, domain, hash of the trajectory
id), and through files (`SpillByKey`): the runner holds where each shard's references lie, not the
references. One worker call then reads its shard's trajectories back in id order, `chunk` at a time,
and turns them into the shard's files with the formatter, tokeniser and packer, streaming rows and
lines into files as it goes, skipping the trajectories deduplication dropped (a side input of the
dropped ids only, so it grows with the duplicates, not with the corpus). Memory per worker is the
shard's references (a few hundred bytes each) and what the chunk and the pack window hold, and the
output is a pure function of the shard's trajectories, so any worker count or bundling writes the
same bytes.

All of a trajectory's samples land in one shard.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterable, Iterator

import apache_beam as beam

from beam_pipelines import dead_letter
from beam_pipelines.dead_letter import DeadLetter, count
from beam_pipelines.memory import release_free_memory
from beam_pipelines.stages.common import (
    AGENTWORLDBENCH,
    AGENTWORLDBENCH_TASKS,
    CPT,
    RL,
    SFT,
    Parked,
    Sample,
    ShardGroup,
    TokenisedDoc,
    shard_group,
    shard_name,
)
from beam_pipelines.stages.format import Formatter
from beam_pipelines.stages.pack import WINDOW, Packer
from beam_pipelines.stages.park import RangeReader, parked_root
from beam_pipelines.stages.spill import SpillByKey, read_spilled
from beam_pipelines.stages.synthesis import Synthesizer
from beam_pipelines.stages.tokenise import tokenise_samples
from beam_pipelines.stages.write import LinesFile, TokenFile
from beam_pipelines.synthesis.settings import SynthesisConfig
from schemas.chat_tokens import shared_tokenizer

DEDUP = "dedup"  # the stage whose decisions are applied here


def spilled_refs_root(output: str) -> str:
    return posixpath.join(parked_root(output), "refs")


class _Shard:
    """The open files of one output shard."""

    def __init__(self, root: str, group: ShardGroup, seq_len: int) -> None:
        self._root, self._group, self._seq_len = root, group, seq_len
        self.tokens: dict[str, tuple[TokenFile, Packer]] = {}
        self.lines: dict[str, LinesFile] = {}

    def pack(self, corpus: str, doc: TokenisedDoc) -> None:
        if corpus not in self.tokens:
            split, domain, shard, of = self._group
            relative = f"{corpus}/{split}/{shard_name(domain, shard, of)}.parquet"
            file = TokenFile(self._root, relative, (corpus, split, domain, shard, of))
            self.tokens[corpus] = (file, Packer(file.write, self._seq_len, WINDOW))
        self.tokens[corpus][1].add(doc)

    def write_line(self, relative: str, record: dict) -> None:
        if relative not in self.lines:
            self.lines[relative] = LinesFile(self._root, relative)
        self.lines[relative].write([record])

    def close(self) -> Iterator[dict]:
        for file, packer in self.tokens.values():
            packer.flush()
            yield file.close()
        for lines in self.lines.values():
            yield lines.close()

    def abort(self, error: BaseException) -> None:
        # a failed attempt leaves no temporary behind; a retry writes the shard again
        for file, _ in self.tokens.values():
            file.held.abort(error)
        for lines in self.lines.values():
            lines.held.abort(error)


class _BuildShard(beam.DoFn):
    def __init__(
        self,
        root: str,
        emit: tuple[str, ...],
        tokenizer: str | None,
        seq_len: int,
        shards: int,
        chunk: int,
        synthesis: SynthesisConfig | None,
        target: str,
        verification_turns: bool,
        history_loss: bool,
    ) -> None:
        self._root, self._emit, self._tokenizer = root, emit, tokenizer
        self._seq_len, self._shards, self._chunk = seq_len, shards, chunk
        self._synthesis, self._target, self._verification_turns = synthesis, target, verification_turns
        self._history_loss = history_loss

    def setup(self) -> None:
        self._formatter = Formatter(
            self._emit,
            self._tokenizer,
            self._seq_len,
            self._shards,
            self._target,
            self._verification_turns,
            self._history_loss,
        )
        self._tok = shared_tokenizer(self._tokenizer) if {SFT, CPT} & set(self._emit) else None
        wanted = self._synthesis is not None and SFT in self._emit
        self._synthesizer = Synthesizer(self._synthesis) if wanted else None

    def teardown(self) -> None:
        if getattr(self, "_synthesizer", None) is not None:
            self._synthesizer.close()

    def process(self, element: tuple[ShardGroup, Iterable[bytes]], dropped: dict) -> Iterator[object]:
        group, locations = element
        reader = RangeReader()
        try:
            kept = yield from self._kept(reader, locations, dropped)
            yield from self._write(reader, group, kept)
        finally:
            reader.close()

    def _kept(self, reader: RangeReader, locations: Iterable[bytes], dropped: dict) -> Iterator[object]:
        """Yields a dead letter per extra record of an id; returns the kept references in id order."""
        kept: list[Parked] = []
        packed = read_spilled(reader, spilled_refs_root(self._root), locations)
        for refs in _by_id(map(Parked.unpacked, packed)):
            # Several records under one id are one record read twice, or a corrupt dataset: keep one,
            # chosen by content hash so the choice does not depend on arrival order.
            first, *others = sorted(refs, key=lambda ref: ref.digest)
            for ref in others:
                count(DEDUP, "duplicate_id")
                detail = "another record with the same trajectory_id was kept"
                yield beam.pvalue.TaggedOutput(
                    dead_letter.DEAD_LETTER,
                    DeadLetter(DEDUP, "duplicate_id", detail, trajectory_id=ref.trajectory_id),
                )
            if first.trajectory_id not in dropped:
                count(DEDUP, "kept")
                kept.append(first)
        return kept

    def _write(self, reader: RangeReader, group: ShardGroup, ordered: list[Parked]) -> Iterator[object]:
        split = group[0]
        shard = _Shard(self._root, group, self._seq_len)
        try:
            for begin in range(0, len(ordered), self._chunk):
                samples: dict[str, list[Sample]] = {SFT: [], CPT: []}
                for t in reader.trajectories(ordered[begin : begin + self._chunk]):
                    for out in self._formatter.format(split, t):
                        if out.tag in samples:
                            samples[out.tag].append(out.value)
                        elif out.tag in (RL, AGENTWORLDBENCH, AGENTWORLDBENCH_TASKS):
                            shard.write_line(*out.value)
                        else:
                            yield out
                if self._synthesizer is not None and samples[SFT]:
                    # the chunk's SFT samples are the teacher's batch (see beam_pipelines.stages.synthesis)
                    samples[SFT], rejected = self._synthesizer.synthesize(samples[SFT])
                    for letter in rejected:
                        yield beam.pvalue.TaggedOutput(dead_letter.DEAD_LETTER, letter)
                for corpus in (CPT, SFT):
                    if samples[corpus]:
                        for doc in tokenise_samples(self._tok, samples[corpus], self._seq_len):
                            if isinstance(doc, TokenisedDoc):
                                shard.pack(corpus, doc)
                            else:
                                yield doc
                release_free_memory()
            yield from shard.close()
        except BaseException as error:
            shard.abort(error)
            raise


def _by_id(refs: Iterable[Parked]) -> list[list[Parked]]:
    """The references grouped by trajectory id, in id order."""
    groups: dict[str, list[Parked]] = defaultdict(list)
    for ref in refs:
        groups[ref.trajectory_id].append(ref)
    return [groups[i] for i in sorted(groups)]


class BuildShards(beam.PTransform):
    """`Parked` references -> {"ok": file stats (as the manifest lists them), "dead_letter": ...}:
    SFT/CPT token shards, RL and AgentWorldBench JSON lines under `root`.

    drops: (trajectory_id, decision) pairs from `Deduplicate`; those trajectories are skipped. Records
    sharing an id within an output shard are kept once (dead letter "duplicate_id", stage dedup).
    synthesis: when given, SFT targets get a teacher's reasoning (`beam_pipelines.stages.synthesis`).
    target: the SFT target form, "full" or "delta" (`beam_pipelines.stages.format`).
    verification_turns: SFT samples of the recorded verification turns too (`stages.format`).
    history_loss: SFT samples train the observations of their history too (`stages.format`).
    """

    def __init__(
        self,
        root: str,
        emit: tuple[str, ...],
        tokenizer: str | None = None,
        seq_len: int = 4096,
        shards: int = 4,
        chunk: int = 64,
        drops: beam.PCollection | None = None,
        synthesis: SynthesisConfig | None = None,
        target: str = "full",
        verification_turns: bool = True,
        history_loss: bool = True,
    ) -> None:
        super().__init__()
        self._args = (
            root,
            emit,
            tokenizer,
            seq_len,
            shards,
            chunk,
            synthesis,
            target,
            verification_turns,
            history_loss,
        )
        self._drops = drops

    def expand(self, refs):
        drops = self._drops if self._drops is not None else refs.pipeline | "NoDrops" >> beam.Create([])
        results = (
            refs
            | "KeyByShard" >> beam.Map(lambda r, n: (shard_group(r, n), r.packed()), self._args[4])
            | "GroupShards" >> SpillByKey(spilled_refs_root(self._args[0]))
            | "FormatTokenisePackWrite"
            >> beam.ParDo(_BuildShard(*self._args), beam.pvalue.AsDict(drops)).with_outputs(
                dead_letter.DEAD_LETTER, main=dead_letter.OK
            )
        )
        return {
            dead_letter.OK: results[dead_letter.OK],
            dead_letter.DEAD_LETTER: results[dead_letter.DEAD_LETTER],
        }

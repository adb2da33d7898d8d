"""Format -> Tokenise -> Pack -> Write fused per output shard, as the pipeline runs them.

The per-stage transforms (`FormatSamples`, `Tokenise`, `Pack`, `WriteTokenShards`, `WriteJsonLines`)
shuffle what they produce, and what they produce grows with the square of a trajectory's length: every
SFT sample and RL prompt repeats the history before it. Through a runner's GroupByKey that is pickled,
sent between processes and held in memory whole (FnApiRunner keeps every grouped collection in memory).
Here only trajectories are grouped, by output shard (split, domain, hash of the trajectory id), and one
worker call turns a shard's trajectories, in id order, into its files chunk by chunk, with the same
formatter, tokeniser, packer and statistics as the stage transforms. Memory per worker is bounded by
the chunk and pack window, not by the corpus, and the output is a pure function of the shard's
trajectories, so any worker count or bundling writes the same bytes.

All of a trajectory's samples land in one shard (the stage transforms spread SFT samples by sample id).
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from beam_pipelines import dead_letter
from beam_pipelines.stages import pack, write
from beam_pipelines.stages.format import AGENTWORLDBENCH, CPT, RL, SFT, Formatter, Sample
from beam_pipelines.stages.tokenise import TokenisedDoc, shared_tokenizer, tokenise_samples
from schemas.records import Trajectory

ShardGroup = tuple[str, str, int, int]  # split, domain, shard, shard count


class _TokenFile:
    """One token shard written row group by row group, renamed into place when complete."""

    def __init__(self, root: str, relative: str, key: pack.ShardKey) -> None:
        self.relative, self.key = relative, key
        self._path = posixpath.join(root, relative)
        self._temporary = f"{self._path}.tmp-{uuid.uuid4().hex}"
        self._file = FileSystems.create(self._temporary)
        self._writer = pq.ParquetWriter(self._file, pack.ROW_SCHEMA, compression="zstd")
        self._rows = 0
        self._lengths: list[np.ndarray] = []
        self._loss = self._echo = 0

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table, row_group_size=write.ROW_GROUP_ROWS)
        self._rows += table.num_rows
        self._lengths.append(table.column("doc_lengths").combine_chunks().flatten().to_numpy())
        self._loss += int(table.column("loss_mask").combine_chunks().flatten().to_numpy().sum())
        echo = table.column("doc_echo").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        self._echo += int(echo.sum())

    def close(self) -> dict[str, Any]:
        self._writer.close()
        self._file.close()
        FileSystems.rename([self._temporary], [self._path])
        corpus, split, domain, _, _ = self.key
        lengths = np.concatenate(self._lengths) if self._lengths else np.zeros(0, np.int32)
        stats = {
            "path": self.relative,
            "corpus": corpus,
            "split": split,
            "domain": domain,
            "rows": self._rows,
            "documents": len(lengths),
            "tokens": int(lengths.sum()),
            "loss_tokens": self._loss,
            "echo_documents": self._echo,
            "length_histogram": write.length_histogram(lengths),
        }
        dead_letter.count(write.STAGE, "files")
        dead_letter.count(write.STAGE, f"{corpus}_documents", stats["documents"])
        dead_letter.count(write.STAGE, f"{corpus}_tokens", stats["tokens"])
        return stats


class _LinesFile:
    """One JSON-lines file, appended in order, renamed into place when complete."""

    def __init__(self, root: str, relative: str) -> None:
        self.relative = relative
        self._path = posixpath.join(root, relative)
        self._temporary = f"{self._path}.tmp-{uuid.uuid4().hex}"
        self._file = FileSystems.create(self._temporary)
        self._lines = 0

    def write(self, records: list[dict]) -> None:
        self._file.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode())
        self._lines += len(records)

    def close(self) -> dict[str, Any]:
        self._file.close()
        FileSystems.rename([self._temporary], [self._path])
        corpus, _, rest = self.relative.partition("/")
        dead_letter.count(write.STAGE, "files")
        dead_letter.count(write.STAGE, f"{corpus}_records", self._lines)
        group = posixpath.dirname(rest) or posixpath.splitext(rest)[0]
        return {
            "path": self.relative,
            "corpus": corpus,
            "split": group,
            "domain": "",
            "documents": self._lines,
        }


class _Packer:
    """Packs one corpus of a shard window by window (`pack.Pack`'s rules) into its token file."""

    def __init__(self, file: _TokenFile, seq_len: int, window: int) -> None:
        self.file, self._seq_len, self._window = file, seq_len, window
        self._docs: list[TokenisedDoc] = []

    def add(self, doc: TokenisedDoc) -> None:
        self._docs.append(doc)
        if len(self._docs) >= self._window:
            self.flush()

    def flush(self) -> None:
        if not self._docs:
            return
        pieces = [p for d in self._docs for p in pack._pieces(d, self._seq_len)]
        bins = pack.best_fit_decreasing([len(p.ids) for p in pieces], self._seq_len)
        rows = [[pieces[i] for i in b] for b in bins]
        dead_letter.count(pack.STAGE, "rows", len(rows))
        self.file.write(pack.rows_table(rows))
        self._docs = []


class _BuildShard(beam.DoFn):
    def __init__(
        self, root: str, emit: tuple[str, ...], tokenizer: str | None, seq_len: int, shards: int, chunk: int
    ) -> None:
        self._root, self._emit, self._tokenizer = root, emit, tokenizer
        self._seq_len, self._shards, self._chunk = seq_len, shards, chunk

    def setup(self) -> None:
        self._formatter = Formatter(self._emit, self._tokenizer, self._seq_len, self._shards)
        self._tok = shared_tokenizer(self._tokenizer) if {SFT, CPT} & set(self._emit) else None

    def process(self, element: tuple[ShardGroup, Iterable[Trajectory]]) -> Iterator[object]:
        (split, domain, shard, of), trajectories = element
        # one record per id (dedup guarantees it; a direct caller may not), in id order
        ordered = sorted({t.trajectory_id: t for t in trajectories}.items())
        packers: dict[str, _Packer] = {}
        lines: dict[str, _LinesFile] = {}
        try:
            for begin in range(0, len(ordered), self._chunk):
                samples: dict[str, list[Sample]] = {SFT: [], CPT: []}
                records: dict[str, list[dict]] = {}
                for _, t in ordered[begin : begin + self._chunk]:
                    for out in self._formatter.format(split, t):
                        tag, value = out.tag, out.value
                        if tag in samples:
                            samples[tag].append(value)
                        elif tag in (RL, AGENTWORLDBENCH):
                            records.setdefault(value[0], []).append(value[1])
                        else:
                            yield out
                for path, batch in records.items():
                    if path not in lines:
                        lines[path] = _LinesFile(self._root, path)
                    lines[path].write(batch)
                for corpus in (CPT, SFT):
                    if not samples[corpus]:
                        continue
                    for doc in tokenise_samples(self._tok, samples[corpus], self._seq_len):
                        if not isinstance(doc, TokenisedDoc):
                            yield doc
                            continue
                        if corpus not in packers:
                            relative = f"{corpus}/{split}/{domain}-{shard:05d}-of-{of:05d}.parquet"
                            key = (corpus, split, domain, shard, of)
                            packers[corpus] = _Packer(
                                _TokenFile(self._root, relative, key), self._seq_len, pack.WINDOW
                            )
                        packers[corpus].add(doc)
            for packer in packers.values():
                packer.flush()
                yield packer.file.close()
            for file in lines.values():
                yield file.close()
        except BaseException:
            # leave no temporary behind on a failed attempt; a retry writes the shard again
            for name in [p.file._temporary for p in packers.values()] + [
                f._temporary for f in lines.values()
            ]:
                if FileSystems.exists(name):
                    FileSystems.delete([name])
            raise


def _key(pair: tuple[str, Trajectory], shards: int) -> tuple[ShardGroup, Trajectory]:
    split, t = pair
    n = pack.shards_for(split, shards)
    return (split, t.domain, pack.shard_of(t.trajectory_id, n), n), t


class BuildShards(beam.PTransform):
    """(split, Trajectory) -> {"ok": file stats (as the Write transforms emit them), "dead_letter": ...}:
    SFT/CPT token shards, RL and AgentWorldBench JSON lines under `root`."""

    def __init__(
        self,
        root: str,
        emit: tuple[str, ...],
        tokenizer: str | None = None,
        seq_len: int = 4096,
        shards: int = 4,
        chunk: int = 64,
    ) -> None:
        super().__init__()
        self._args = (root, emit, tokenizer, seq_len, shards, chunk)

    def expand(self, pairs):
        results = (
            pairs
            | "KeyByShard" >> beam.Map(_key, self._args[4])
            | "GroupShards" >> beam.GroupByKey()
            | "FormatTokenisePackWrite"
            >> beam.ParDo(_BuildShard(*self._args)).with_outputs(dead_letter.DEAD_LETTER, main=dead_letter.OK)
        )
        return {
            dead_letter.OK: results[dead_letter.OK],
            dead_letter.DEAD_LETTER: results[dead_letter.DEAD_LETTER],
        }

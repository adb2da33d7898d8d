"""Write token shards (Parquet), JSON-lines corpora, and the manifest with statistics.

Every file has a name fixed by its content's key and its lines or rows in a fixed order, so two runs
over the same input write identical bytes. Every file goes through `schemas.atomic.atomic_open`
(written under a temporary name, renamed when complete, on any fsspec filesystem), so a killed run
never leaves a torn file under a final name.
"""

from __future__ import annotations

import json
import math
import posixpath
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from typing import IO, Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from beam_pipelines import dead_letter
from beam_pipelines.stages.common import SFT, ShardKey
from beam_pipelines.stages.pack import ROW_SCHEMA
from schemas.atomic import atomic_open

STAGE = "write"
ROW_GROUP_ROWS = 512  # about 2M tokens at seq_len 4096: a few MB per row group
TARGET_TOKENS = "target_tokens"  # an SFT file's answer lengths (length -> documents), for the manifest


class HeldFile:
    """`atomic_open(target)` held open across calls: `commit` renames the file into place, `abort`
    removes it. For files written piece by piece from several DoFn calls."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._context = atomic_open(target)
        self.file: IO[Any] = self._context.__enter__()

    def commit(self) -> None:
        self._context.__exit__(None, None, None)

    def abort(self, error: BaseException) -> None:
        self._context.__exit__(type(error), error, error.__traceback__)


def length_histogram(lengths: np.ndarray) -> dict[str, int]:
    """Counts of lengths per power-of-two bucket, keyed by the bucket's upper bound ("<=N")."""
    if len(lengths) == 0:
        return {}
    bounds = np.left_shift(1, np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64))
    values, counts = np.unique(bounds, return_counts=True)
    return {f"<={int(v)}": int(c) for v, c in zip(values, counts, strict=True)}


def _trailing_ones(mask: np.ndarray) -> int:
    zeros = np.flatnonzero(mask == 0)
    return len(mask) - (int(zeros[-1]) + 1 if len(zeros) else 0)


class TokenFile:
    """One token shard written row group by row group, renamed into place when complete."""

    def __init__(self, root: str, relative: str, key: ShardKey) -> None:
        self.relative, self.key = relative, key
        self.held = HeldFile(posixpath.join(root, relative))
        self._writer = pq.ParquetWriter(self.held.file, ROW_SCHEMA, compression="zstd")
        self._rows = 0
        self._lengths: list[np.ndarray] = []
        self._targets: Counter[int] = Counter()  # SFT: tokens of each document's answer (its loss span)
        self._loss = self._echo = 0

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self._rows += table.num_rows
        lengths = table.column("doc_lengths").combine_chunks().flatten().to_numpy()
        loss = table.column("loss_mask").combine_chunks().flatten().to_numpy()
        self._lengths.append(lengths)
        self._loss += int(loss.sum())
        if self.key[0] == SFT and len(lengths):
            # rows are documents end to end, and each document's answer is the run of trained tokens it
            # ends with (with --history-loss, trained observations of its history come before)
            ends = np.cumsum(lengths)
            self._targets.update(_trailing_ones(loss[a:b]) for a, b in zip(ends - lengths, ends, strict=True))
        echo = table.column("doc_echo").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        self._echo += int(echo.sum())

    def close(self) -> dict[str, Any]:
        self._writer.close()
        self.held.commit()
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
            "length_histogram": length_histogram(lengths),
        }
        if self._targets:
            stats[TARGET_TOKENS] = dict(self._targets)
        dead_letter.count(STAGE, "files")
        dead_letter.count(STAGE, f"{corpus}_documents", stats["documents"])
        dead_letter.count(STAGE, f"{corpus}_tokens", stats["tokens"])
        return stats


class LinesFile:
    """One JSON-lines file, appended in order, renamed into place when complete."""

    def __init__(self, root: str, relative: str) -> None:
        self.relative = relative
        self.held = HeldFile(posixpath.join(root, relative))
        self._lines = 0

    def write(self, records: Iterable[dict]) -> None:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        self.held.file.write(text.encode())
        self._lines += text.count("\n")

    def close(self) -> dict[str, Any]:
        self.held.commit()
        return lines_stats(self.relative, self._lines)


def lines_stats(relative: str, lines: int) -> dict[str, Any]:
    corpus, _, rest = relative.partition("/")
    dead_letter.count(STAGE, "files")
    dead_letter.count(STAGE, f"{corpus}_records", lines)
    # totals group rl by split, and the single-file corpora by file name ("terminal_test", "read")
    group = posixpath.dirname(rest) or posixpath.splitext(rest)[0]
    return {"path": relative, "corpus": corpus, "split": group, "domain": "", "documents": lines}


def _line_order(record: dict[str, Any], line: str) -> tuple:
    # trajectory then turn number, so "t:10" comes after "t:9"; the line itself breaks any tie
    trajectory = record.get("trajectory_id") or str(record.get("id", "")).rpartition(":")[0]
    return (trajectory, record.get("turn_idx", 0), line)


class _WriteLines(beam.DoFn):
    def __init__(self, root: str) -> None:
        self._root = root

    def process(self, element: tuple[str, Iterable[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
        relative, records = element
        keyed = [(r, json.dumps(r, ensure_ascii=False)) for r in records]
        lines = [line for _, line in sorted(keyed, key=lambda rl: _line_order(*rl))]
        with atomic_open(posixpath.join(self._root, relative)) as f:
            f.write("".join(f"{x}\n" for x in lines).encode())
        yield lines_stats(relative, len(lines))


class WriteJsonLines(beam.PTransform):
    """(relative path, JSON-able record) -> one JSON-lines file per path under `root`; emits file stats."""

    def __init__(self, root: str) -> None:
        super().__init__()
        self._root = root

    def expand(self, records):
        return (
            records | "GroupByFile" >> beam.GroupByKey() | "WriteJsonl" >> beam.ParDo(_WriteLines(self._root))
        )


def percentile_95(counts: Counter[int]) -> int:
    """The nearest-rank 95th percentile of values given as value -> count."""
    rank, seen = math.ceil(0.95 * sum(counts.values())), 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return int(value)
    return 0


def _target_tokens_p95(stats: list[dict[str, Any]]) -> dict[str, int]:
    """Per domain, the 95th percentile of the SFT answers' lengths in tokens (every split): what a
    reply of that domain needs as its generation bound."""
    per_domain: dict[str, Counter[int]] = defaultdict(Counter)
    for s in stats:
        per_domain[s["domain"]].update({int(k): v for k, v in s.get(TARGET_TOKENS, {}).items()})
    return {domain: percentile_95(counts) for domain, counts in sorted(per_domain.items()) if counts}


def manifest(stats: Iterable[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    """The manifest: every file with its statistics, totals per corpus/split/domain, length histograms,
    and per domain the 95th percentile of the SFT answers' lengths (`target_tokens_p95`)."""
    stats = list(stats)
    p95 = _target_tokens_p95(stats)
    files = sorted(
        ({k: v for k, v in s.items() if k != TARGET_TOKENS} for s in stats), key=lambda s: s["path"]
    )
    totals: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    histograms: dict[str, Counter] = defaultdict(Counter)
    for s in files:
        group = totals[s["corpus"]][f"{s['split']}/{s['domain']}" if s["domain"] else s["split"]]
        group.update({k: s[k] for k in ("rows", "documents", "tokens", "loss_tokens") if k in s})
        group["files"] += 1
        histograms[s["corpus"]].update(s.get("length_histogram", {}))
    order = lambda h: sorted(h.items(), key=lambda kv: int(kv[0][2:]))  # noqa: E731
    return {
        "config": config,
        "files": files,
        "totals": {
            c: {g: dict(v) for g, v in sorted(groups.items())} for c, groups in sorted(totals.items())
        },
        "length_histogram": {c: dict(order(h)) for c, h in sorted(histograms.items())},
        "target_tokens_p95": p95,
    }


class _WriteManifest(beam.DoFn):
    def __init__(self, root: str, config: dict[str, Any]) -> None:
        self._root = root
        self._config = config

    def process(self, stats: list[dict[str, Any]]) -> Iterator[str]:
        text = json.dumps(manifest(stats, self._config), indent=1, ensure_ascii=False) + "\n"
        path = posixpath.join(self._root, "manifest.json")
        with atomic_open(path) as f:
            f.write(text.encode())
        yield path


class WriteManifest(beam.PTransform):
    """File stats -> OUT/manifest.json (written once, after every file is written)."""

    def __init__(self, root: str, config: dict[str, Any]) -> None:
        super().__init__()
        self._root = root
        self._config = config

    def expand(self, stats):
        return (
            stats
            | "CollectStats" >> beam.combiners.ToList()
            | "WriteManifestJson" >> beam.ParDo(_WriteManifest(self._root, self._config))
        )

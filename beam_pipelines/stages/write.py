"""Write token shards (Parquet), JSON-lines corpora, and the manifest with statistics.

Every file has a name fixed by its content's key and its lines or rows in a fixed order, so two runs
over the same input write identical bytes. Files are written to a temporary name and renamed, so a
killed run never leaves a torn file under a final name. All I/O goes through Beam `FileSystems`
(local paths, gs://, s3://) so the same code runs on Dataflow and Flink workers.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from beam_pipelines import dead_letter
from beam_pipelines.stages.pack import ShardKey

STAGE = "write"
ROW_GROUP_ROWS = 512  # about 2M tokens at seq_len 4096: a few MB per row group


def _atomic_write(path: str, write: Any) -> None:
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    with FileSystems.create(temporary) as f:
        write(f)
    FileSystems.rename([temporary], [path])


def length_histogram(lengths: np.ndarray) -> dict[str, int]:
    """Counts of lengths per power-of-two bucket, keyed by the bucket's upper bound ("<=N")."""
    if len(lengths) == 0:
        return {}
    bounds = np.left_shift(1, np.ceil(np.log2(np.maximum(lengths, 1))).astype(np.int64))
    values, counts = np.unique(bounds, return_counts=True)
    return {f"<={int(v)}": int(c) for v, c in zip(values, counts, strict=True)}


class _WriteShard(beam.DoFn):
    def __init__(self, root: str) -> None:
        self._root = root

    def process(self, element: tuple[ShardKey, pa.Table]) -> Iterator[dict[str, Any]]:
        (corpus, split, domain, shard, of), table = element
        relative = f"{corpus}/{split}/{domain}-{shard:05d}-of-{of:05d}.parquet"
        _atomic_write(
            posixpath.join(self._root, relative),
            lambda f: pq.write_table(table, f, compression="zstd", row_group_size=ROW_GROUP_ROWS),
        )
        lengths = table.column("doc_lengths").combine_chunks().flatten().to_numpy()
        loss = table.column("loss_mask").combine_chunks().flatten().to_numpy()
        echo = table.column("doc_echo").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        stats = {
            "path": relative,
            "corpus": corpus,
            "split": split,
            "domain": domain,
            "rows": table.num_rows,
            "documents": len(lengths),
            "tokens": int(lengths.sum()),
            "loss_tokens": int(loss.sum()),
            "echo_documents": int(echo.sum()),
            "length_histogram": length_histogram(lengths),
        }
        dead_letter.count(STAGE, "files")
        dead_letter.count(STAGE, f"{corpus}_documents", stats["documents"])
        dead_letter.count(STAGE, f"{corpus}_tokens", stats["tokens"])
        yield stats


class WriteTokenShards(beam.PTransform):
    """(ShardKey, packed rows) -> OUT/<corpus>/<split>/<domain>-SSSSS-of-NNNNN.parquet; emits file stats."""

    def __init__(self, root: str) -> None:
        super().__init__()
        self._root = root

    def expand(self, tables):
        return tables | "WriteParquet" >> beam.ParDo(_WriteShard(self._root))


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
        _atomic_write(
            posixpath.join(self._root, relative), lambda f: f.write("".join(f"{x}\n" for x in lines).encode())
        )
        corpus, _, rest = relative.partition("/")
        dead_letter.count(STAGE, "files")
        dead_letter.count(STAGE, f"{corpus}_records", len(lines))
        # totals group rl by split, and the single-file corpora by file name ("terminal_test", "read")
        group = posixpath.dirname(rest) or posixpath.splitext(rest)[0]
        yield {"path": relative, "corpus": corpus, "split": group, "domain": "", "documents": len(lines)}


class WriteJsonLines(beam.PTransform):
    """(relative path, JSON-able record) -> one JSON-lines file per path under `root`; emits file stats."""

    def __init__(self, root: str) -> None:
        super().__init__()
        self._root = root

    def expand(self, records):
        return (
            records | "GroupByFile" >> beam.GroupByKey() | "WriteJsonl" >> beam.ParDo(_WriteLines(self._root))
        )


def manifest(stats: Iterable[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    """The manifest: every file with its statistics, totals per corpus/split/domain, length histograms."""
    files = sorted(stats, key=lambda s: s["path"])
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
    }


class _WriteManifest(beam.DoFn):
    def __init__(self, root: str, config: dict[str, Any]) -> None:
        self._root = root
        self._config = config

    def process(self, stats: list[dict[str, Any]]) -> Iterator[str]:
        text = json.dumps(manifest(stats, self._config), indent=1, ensure_ascii=False) + "\n"
        path = posixpath.join(self._root, "manifest.json")
        _atomic_write(path, lambda f: f.write(text.encode()))
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

"""What both exports share: opening a finished corpus, preparing the output folder, reading token
shards row group by row group, and the closing summary."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

from beam_pipelines.stages.common import CPT, SFT

TOKEN_CORPORA = (CPT, SFT)
SPLIT_ORDER = ("train", "validation", "test")


class ExportError(Exception):
    """A problem the user can fix; the message says how."""


@dataclass
class Corpus:
    """A finished corpus: its root, filesystem and manifest.json."""

    root: str
    fs: AbstractFileSystem
    path: str  # the root on `fs`
    manifest: dict[str, Any]

    def files(self, corpus: str, splits: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The manifest's entries of one corpus (optionally only some splits), sorted by path, so
        domains come in alphabetical order and each domain's shards in order."""
        wanted = None if splits is None else set(splits)
        return sorted(
            (
                f
                for f in self.manifest["files"]
                if f["corpus"] == corpus and (wanted is None or f["split"] in wanted)
            ),
            key=lambda f: f["path"],
        )

    def splits(self, corpus: str) -> list[str]:
        found = {f["split"] for f in self.files(corpus)}
        return sorted(found, key=split_rank)

    def open(self, relative: str, mode: str = "rb"):
        return self.fs.open(posixpath.join(self.path, relative), mode)

    def config(self) -> dict[str, Any]:
        return self.manifest.get("config", {})

    def report(self) -> dict[str, Any] | None:
        """OUT/report.json, or None when the corpus has none."""
        target = posixpath.join(self.path, "report.json")
        if not self.fs.exists(target):
            return None
        with self.fs.open(target, "rb") as f:
            return json.loads(f.read())


def split_rank(split: str) -> tuple[int, str]:
    return (SPLIT_ORDER.index(split) if split in SPLIT_ORDER else len(SPLIT_ORDER), split)


def open_corpus(root: str) -> Corpus:
    """The corpus at `root`; refuses one without manifest.json (build_corpus writes it last)."""
    fs, path = url_to_fs(root.rstrip("/"))
    manifest_path = posixpath.join(path, "manifest.json")
    if not fs.exists(manifest_path):
        raise ExportError(
            f"{root} has no manifest.json: it is not a finished corpus. Build one first with "
            f"`python -m beam_pipelines.build_corpus --input RAW --output {root}` (the manifest is written "
            "last, so a run that was killed leaves none: run it again)."
        )
    with fs.open(manifest_path, "rb") as f:
        manifest = json.loads(f.read())
    missing = [e["path"] for e in manifest.get("files", []) if not fs.exists(posixpath.join(path, e["path"]))]
    if missing:
        raise ExportError(
            f"{root}/manifest.json lists {len(missing)} file(s) that are not there (first: {missing[0]}): "
            "rebuild the corpus with build_corpus."
        )
    return Corpus(root.rstrip("/"), fs, path, manifest)


def prepare_output(out: str, overwrite: bool, corpus: Corpus) -> str:
    """An empty output folder: refuses a non-empty one unless `overwrite` (then empties it first).
    Returns `out` as the root to write under (a path or URI)."""
    fs, path = url_to_fs(out.rstrip("/"))
    inside = path == corpus.path or path.startswith(corpus.path + "/") or corpus.path.startswith(path + "/")
    if type(fs) is type(corpus.fs) and inside:
        raise ExportError(f"--out {out} overlaps the corpus {corpus.root}: choose a folder outside it.")
    if fs.exists(path) and fs.ls(path, detail=False):
        if not overwrite:
            raise ExportError(
                f"--out {out} is not empty: choose a new folder, or pass --overwrite to replace its contents."
            )
        for entry in fs.ls(path, detail=False):
            fs.rm(entry, recursive=True)
    fs.makedirs(path, exist_ok=True)
    return out.rstrip("/")


def row_groups(corpus: Corpus, relative: str, columns: list[str] | None = None) -> Iterator[pa.Table]:
    """A token shard's row groups, one at a time (memory holds one row group, not the file)."""
    with corpus.open(relative) as f:
        reader = pq.ParquetFile(f)
        for i in range(reader.num_row_groups):
            yield reader.read_row_group(i, columns=columns)


@dataclass
class Summary:
    """Files, documents and tokens written, per corpus and split, printed at the end of an export."""

    rows: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)

    def add(self, corpus: str, split: str, **counts: int) -> None:
        group = self.rows.setdefault((corpus, split), {})
        for name, value in counts.items():
            group[name] = group.get(name, 0) + value

    def render(self, title: str) -> str:
        columns = sorted({c for counts in self.rows.values() for c in counts}, key=_column_rank)
        lines = [title, "", "| corpus | split | " + " | ".join(columns) + " |"]
        lines.append("|---|---|" + "---:|" * len(columns))
        for (corpus, split), counts in sorted(
            self.rows.items(), key=lambda kv: (kv[0][0], split_rank(kv[0][1]))
        ):
            cells = " | ".join(f"{counts[c]:,}" if c in counts else "-" for c in columns)
            lines.append(f"| {corpus} | {split} | {cells} |")
        return "\n".join(lines)


def _column_rank(name: str) -> tuple[int, str]:
    order = ("files", "rows", "documents", "tokens", "loss_tokens")
    return (order.index(name) if name in order else len(order), name)


def manifest_totals(corpus: Corpus, name: str, split: str) -> dict[str, int]:
    """The manifest's per-file counts of one corpus and split, added up."""
    totals: dict[str, int] = {}
    for entry in corpus.files(name, [split]):
        for key in ("rows", "documents", "tokens", "loss_tokens"):
            if key in entry:
                totals[key] = totals.get(key, 0) + entry[key]
    return totals

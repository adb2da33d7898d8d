"""Export a corpus as a Hugging Face Hub dataset folder: Parquet per config and split, and a README.md
dataset card (`beam_pipelines.exports.card`) whose `configs` let `datasets.load_dataset(DIR, CONFIG)`
and the Hub's viewer read every config and split.

Configs: `cpt` and `sft` (the packed token rows as build_corpus wrote them, plus a `domain` column),
`rl` (one RL prompt per row: chat `messages` nested, the reference and its metadata; free-form parts as
JSON text) and `agentworldbench` (split `test`: the public AgentWorldBench fields, all domains). Files
keep the corpus's names (`<config>/<split>/<domain>-0000i-of-0000n.parquet`). Everything streams: a
token shard is copied row group by row group, a JSON-lines file 1,024 lines at a time.
"""

from __future__ import annotations

import posixpath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.core import url_to_fs
from tqdm import tqdm

from beam_pipelines.exports import card
from beam_pipelines.exports.common import (
    Corpus,
    ExportError,
    Summary,
    open_corpus,
    prepare_output,
    row_groups,
    split_rank,
)
from beam_pipelines.exports.tables import (
    AGENTWORLDBENCH_COLUMNS,
    RL_COLUMNS,
    TOKEN_SCHEMA,
    features,
    line_batches,
    records_schema,
    records_table,
    with_domain,
)
from beam_pipelines.stages.common import AGENTWORLDBENCH, CPT, EVAL_SPLIT, RL, SFT
from schemas.atomic import atomic_open, atomic_write

CONFIGS = (CPT, SFT, RL, AGENTWORLDBENCH)


def _target(entry: dict[str, Any]) -> tuple[str, str]:
    """(Hub split, path under the export) of one manifest entry."""
    corpus, path = entry["corpus"], entry["path"]
    stem = posixpath.splitext(posixpath.basename(path))[0]
    if corpus == AGENTWORLDBENCH:  # agentworldbench/<domain>_test.jsonl -> one test split
        return EVAL_SPLIT, f"{AGENTWORLDBENCH}/{EVAL_SPLIT}/{stem.removesuffix('_' + EVAL_SPLIT)}.parquet"
    return entry["split"], f"{corpus}/{entry['split']}/{stem}.parquet"


def _entries(corpus: Corpus, config: str) -> list[dict[str, Any]]:
    entries = corpus.files(config)
    if config == AGENTWORLDBENCH:  # the per-trajectory task files (tasks/) are not benchmark records
        entries = [e for e in entries if posixpath.dirname(e["path"]) == AGENTWORLDBENCH]
    return entries


def _write_tokens(corpus: Corpus, entry: dict[str, Any], target: str) -> dict[str, int]:
    counts = {"rows": 0, "documents": 0, "tokens": 0}
    with atomic_open(target) as f, pq.ParquetWriter(f, TOKEN_SCHEMA, compression="zstd") as writer:
        for table in row_groups(corpus, entry["path"]):
            table = with_domain(table, entry["domain"])
            writer.write_table(table)
            lengths = table.column("doc_lengths").combine_chunks().flatten()
            counts["rows"] += table.num_rows
            counts["documents"] += len(lengths)
            counts["tokens"] += int(pa.compute.sum(lengths).as_py() or 0)
    return counts


def _write_records(corpus: Corpus, entry: dict[str, Any], target: str, columns: tuple) -> dict[str, int]:
    rows = 0
    with (
        atomic_open(target) as f,
        pq.ParquetWriter(f, records_schema(columns), compression="zstd") as writer,
        corpus.open(entry["path"]) as lines,
    ):
        for batch in line_batches(lines):
            writer.write_table(records_table(batch, columns))
            rows += len(batch)
    return {"rows": rows, "documents": rows}


def _schema(config: str) -> pa.Schema:
    if config in (CPT, SFT):
        return TOKEN_SCHEMA
    return records_schema(RL_COLUMNS if config == RL else AGENTWORLDBENCH_COLUMNS)


def _export_config(corpus: Corpus, root: str, config: str, bar: tqdm, summary: Summary) -> dict[str, Any]:
    splits: dict[str, dict[str, Any]] = {}
    for entry in _entries(corpus, config):
        split, relative = _target(entry)
        target = posixpath.join(root, relative)
        if config in (CPT, SFT):
            counts = _write_tokens(corpus, entry, target)
        else:
            counts = _write_records(
                corpus, entry, target, RL_COLUMNS if config == RL else AGENTWORLDBENCH_COLUMNS
            )
        size = _size(target)
        group = splits.setdefault(
            split, {"name": split, "path": f"{config}/{split}/*.parquet", "bytes": 0, "files": 0}
        )
        group["bytes"] += size
        group["files"] += 1
        for key, value in counts.items():
            group[key] = group.get(key, 0) + value
        summary.add(config, split, files=1, **counts)
        bar.update(1)
    ordered = [splits[s] for s in sorted(splits, key=split_rank)]
    return {"name": config, "features": features(_schema(config)), "splits": ordered}


def _size(target: str) -> int:
    fs, path = url_to_fs(target)
    return int(fs.size(path))


def _configs(corpus: Corpus, wanted: list[str] | None) -> list[str]:
    unknown = [c for c in wanted or [] if c not in CONFIGS]
    if unknown:
        raise ExportError(f"--corpora {','.join(unknown)}: the Hub export knows {', '.join(CONFIGS)}.")
    chosen = [c for c in (wanted or CONFIGS) if _entries(corpus, c)]
    if not chosen:
        raise ExportError(f"{corpus.root} holds none of {', '.join(wanted or CONFIGS)}: nothing to export.")
    return chosen


def export_hub(
    corpus: Corpus,
    out: str,
    *,
    name: str | None = None,
    corpora: list[str] | None = None,
    captured_license: str | None = None,
    overwrite: bool = False,
    command: list[str] | None = None,
    progress: bool = True,
) -> tuple[dict[str, Any], Summary]:
    """Write the Parquet configs and README.md under `out`; return the card's front matter and the
    counts written."""
    configs = _configs(corpus, corpora)
    root = prepare_output(out, overwrite, corpus)
    summary = Summary()
    total = sum(len(_entries(corpus, c)) for c in configs)
    with tqdm(total=total, unit="file", desc="hub", disable=not progress) as bar:
        written = [_export_config(corpus, root, c, bar, summary) for c in configs]
    found = card.provenance(corpus.report())
    title = name or posixpath.basename(corpus.root) or "agentworld-corpus"
    rows = sum(s["rows"] for c in written for s in c["splits"])
    front = card.front_matter(title, card.hub_license(found, captured_license), written, rows)
    prose = card.prose(title, written, found, captured_license, corpus.config(), command or [])
    # the card goes last: a folder with a README.md is a finished export
    atomic_write(posixpath.join(root, "README.md"), card.render(front, prose))
    return front, summary


def main_hub(args: Any) -> int:
    front, summary = export_hub(
        open_corpus(args.corpus),
        args.out,
        name=args.name,
        corpora=args.corpora,
        captured_license=args.captured_license,
        overwrite=args.overwrite,
        command=args.command_line,
        progress=not args.no_progress,
    )
    print(summary.render(f"Hub dataset folder {args.out} (license: {front['license']})"))
    return 0

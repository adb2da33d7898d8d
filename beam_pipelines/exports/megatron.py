"""Export CPT and SFT token shards as Megatron-LM indexed datasets (.bin/.idx, written by our own
`beam_pipelines.exports.indexed`; megatron-core is not needed at run time).

Layout, per corpus and split: `<out>/<corpus>/<split>/<corpus>_<split>_text_document.bin/.idx`
(Megatron's `preprocess_data.py` names its output `<prefix>_text_document`). Every document packed into
a corpus row becomes one Megatron document (the rows are unpacked with `doc_lengths`; Megatron's
`GPTDataset` packs its own samples), domains concatenated in alphabetical order, each domain's shards in
order, so the export is the same bytes every time. A document the pipeline cut into `seq_len` chunks
(`id@0`, `id@1`, ...) stays as those chunks, so the document counts equal manifest.json's.

Training with it: `--data-path <out>/cpt/train/cpt_train_text_document` (or a blend, "0.7 PREFIX_A 0.3
PREFIX_B"), or `--train-data-path/--valid-data-path/--test-data-path` with each split's prefix, and
`--tokenizer-type HuggingFaceTokenizer --tokenizer-model` the tokenizer manifest.json names by SHA-256.

SFT loss masks: Megatron-LM's own SFT path (`megatron/training/datasets/sft_dataset.py`) tokenises chat
JSONL at run time and builds its own mask; ours is already decided (1 on the predicted-observation
tokens, 0 on the prompt). So SFT also gets `<corpus>_<split>_loss_mask_document.bin/.idx`: a parallel
indexed dataset of uint8 0/1, with exactly the same sequence lengths and document indices as the token
dataset. A `GPTDataset` subclass uses it by opening it as a second `IndexedDataset` and making the same
`get(document, offset, length)` calls for the mask that `_query_document_sample_shuffle_index` makes for
the tokens, then returning that mask (shifted with the labels) in place of the all-ones one.

`export.json` (written last: its presence means the export finished) lists every dataset with its
documents and tokens.
"""

from __future__ import annotations

import json
import posixpath
import sys
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from tqdm import tqdm

from beam_pipelines.exports.common import (
    TOKEN_CORPORA,
    Corpus,
    ExportError,
    Summary,
    open_corpus,
    prepare_output,
    row_groups,
)
from beam_pipelines.exports.indexed import IndexedDatasetWriter, token_dtype
from beam_pipelines.stages.common import SFT
from schemas.atomic import atomic_write

TOKEN_COLUMNS = ["input_ids", "loss_mask", "doc_lengths"]
IDS_LEAF = "input_ids.list.element"


def text_prefix(corpus: str, split: str) -> str:
    return f"{corpus}/{split}/{corpus}_{split}_text_document"


def loss_mask_prefix(corpus: str, split: str) -> str:
    return f"{corpus}/{split}/{corpus}_{split}_loss_mask_document"


def max_token_id(corpus: Corpus, files: list[dict[str, Any]]) -> int:
    """The largest token id in the shards, from the Parquet column statistics where the writer kept
    them (no data read), else by scanning the column row group by row group."""
    largest = -1
    for entry in files:
        with corpus.open(entry["path"]) as f:
            meta = pq.ParquetFile(f).metadata
            column = next(i for i in range(meta.num_columns) if meta.schema.column(i).path == IDS_LEAF)
            stats = [meta.row_group(g).column(column).statistics for g in range(meta.num_row_groups)]
        if all(s is not None and s.has_min_max for s in stats):
            largest = max([largest, *(int(s.max) for s in stats)])
            continue
        for table in row_groups(corpus, entry["path"], ["input_ids"]):
            ids = table.column("input_ids").combine_chunks().flatten().to_numpy()
            if len(ids):
                largest = max(largest, int(ids.max()))
    return largest


def choose_dtype(
    corpus: Corpus, selected: dict[tuple[str, str], list[dict]], vocab_size: int | None
) -> np.dtype:
    """One token dtype for the whole export, by Megatron's rule on the vocabulary size: the one given,
    else the largest token id + 1 (a lower bound on the vocabulary, exact enough for the rule)."""
    largest = max((max_token_id(corpus, files) for files in selected.values()), default=-1)
    if vocab_size is not None and vocab_size <= largest:
        raise ExportError(f"--vocab-size {vocab_size} is too small: the corpus holds token id {largest}.")
    return token_dtype(vocab_size if vocab_size is not None else largest + 1)


def _export_split(
    corpus: Corpus, out: str, name: str, split: str, files: list[dict], dtype: np.dtype, bar: tqdm
) -> dict[str, Any]:
    with_mask = name == SFT
    text = IndexedDatasetWriter(posixpath.join(out, text_prefix(name, split)), dtype)
    mask = IndexedDatasetWriter(posixpath.join(out, loss_mask_prefix(name, split)), np.uint8)
    loss_tokens = 0
    with text, mask if with_mask else _Nothing():
        for entry in files:
            for table in row_groups(corpus, entry["path"], TOKEN_COLUMNS):
                # rows hold their documents back to back, unpadded: the flattened columns are the
                # documents in order, and the flattened lengths cut them apart
                ids = table.column("input_ids").combine_chunks().flatten().to_numpy()
                lengths = table.column("doc_lengths").combine_chunks().flatten().to_numpy()
                losses = table.column("loss_mask").combine_chunks().flatten().to_numpy()
                text.add_many(ids, lengths)
                loss_tokens += int(losses.sum())
                if with_mask:
                    mask.add_many(losses.astype(np.uint8), lengths)
            bar.update(1)
    dataset = {
        "corpus": name,
        "split": split,
        "prefix": text_prefix(name, split),
        "dtype": str(dtype),
        "files": len(files),
        "documents": text.documents,
        "tokens": text.tokens,
        "loss_tokens": loss_tokens,
    }
    if with_mask:
        dataset["loss_mask_prefix"] = loss_mask_prefix(name, split)
    return dataset


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def export_megatron(
    corpus: Corpus,
    out: str,
    *,
    corpora: list[str] | None = None,
    splits: list[str] | None = None,
    vocab_size: int | None = None,
    overwrite: bool = False,
    command: list[str] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write the indexed datasets and export.json under `out`; return export.json's content."""
    names = corpora or [c for c in TOKEN_CORPORA if corpus.files(c)]
    unknown = [c for c in names if c not in TOKEN_CORPORA]
    if unknown:
        raise ExportError(
            f"--corpora {','.join(unknown)}: Megatron exports token corpora only "
            f"({', '.join(TOKEN_CORPORA)})."
        )
    # a split asked for by name but absent gets an empty dataset, so a training config naming it still loads
    selected = {(c, s): corpus.files(c, [s]) for c in names for s in (splits or corpus.splits(c))}
    if not selected:
        raise ExportError(f"{corpus.root} holds no {' or '.join(names)} token shards: nothing to export.")
    root = prepare_output(out, overwrite, corpus)
    dtype = choose_dtype(corpus, selected, vocab_size)
    datasets = []
    total = sum(len(files) for files in selected.values())
    with tqdm(total=total, unit="file", desc="megatron", disable=not progress) as bar:
        for (name, split), files in selected.items():
            datasets.append(_export_split(corpus, root, name, split, files, dtype, bar))
    result = {
        "format": "megatron-core indexed dataset (MMIDIDX version 1)",
        "corpus": corpus.root,
        "dtype": str(dtype),
        "command": command or [],
        "corpus_config": corpus.config(),
        "datasets": datasets,
    }
    atomic_write(posixpath.join(root, "export.json"), json.dumps(result, indent=1) + "\n")
    return result


def summary(result: dict[str, Any]) -> Summary:
    table = Summary()
    for d in result["datasets"]:
        table.add(d["corpus"], d["split"], files=d["files"], documents=d["documents"], tokens=d["tokens"])
    return table


def main_megatron(args: Any) -> int:
    result = export_megatron(
        open_corpus(args.corpus),
        args.out,
        corpora=args.corpora,
        splits=args.splits,
        vocab_size=args.vocab_size,
        overwrite=args.overwrite,
        command=args.command_line,
        progress=not args.no_progress,
    )
    print(summary(result).render(f"Megatron indexed datasets ({result['dtype']} tokens) in {args.out}"))
    for d in result["datasets"]:
        if d["files"] == 0:  # most likely a misspelt --splits
            note = f"note: the corpus has no {d['corpus']}/{d['split']}: wrote an empty dataset"
            print(note, file=sys.stderr)
    return 0

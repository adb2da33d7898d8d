"""The fused shard builder the pipeline runs: same texts and token ids as the stage transforms."""

from __future__ import annotations

import json

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages.format import CORPORA, CPT, SFT, Formatter
from beam_pipelines.stages.shards import BuildShards
from beam_pipelines.stages.tokenise import shared_tokenizer
from tests.beam_pipelines.conftest import pipeline


def _pairs(recorded):
    return [("test" if i % 4 == 0 else "train", t) for i, t in enumerate(recorded)]


def _documents(root, corpus):
    docs = {}
    for f in sorted((root / corpus).rglob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            at = 0
            for doc_id, n in zip(row["doc_ids"], row["doc_lengths"], strict=True):
                docs[doc_id] = (row["input_ids"][at : at + n], row["loss_mask"][at : at + n])
                at += n
    return docs


def test_shards_hold_every_sample_with_the_tokeniser_ids(recorded, tmp_path):
    pairs = _pairs(recorded)
    with pipeline() as p:
        out = p | beam.Create(pairs) | BuildShards(str(tmp_path), CORPORA, seq_len=32768, shards=2)
        assert_that(out[DEAD_LETTER], equal_to([]), label="NoDeadLetters")
        assert_that(
            out[OK] | beam.Map(lambda s: s["path"]),
            equal_to(
                [
                    "sft/train/terminal-00000-of-00002.parquet",
                    "sft/train/terminal-00001-of-00002.parquet",
                    "cpt/train/terminal-00000-of-00002.parquet",
                    "cpt/train/terminal-00001-of-00002.parquet",
                    "sft/test/terminal-00000-of-00001.parquet",
                    "cpt/test/terminal-00000-of-00001.parquet",
                    "rl/train/terminal-00000-of-00002.jsonl",
                    "rl/train/terminal-00001-of-00002.jsonl",
                    "rl/test/terminal-00000-of-00001.jsonl",
                    "agentworldbench/terminal_test.jsonl",
                ]
            ),
            label="Files",
        )
    formatter = Formatter(CORPORA, None, 32768, 2)
    tok = shared_tokenizer(None)
    expected = {SFT: {}, CPT: {}}
    for split, t in pairs:
        samples = [o.value for o in formatter.format(split, t) if o.tag in (SFT, CPT)]
        for s, (ids, loss_start) in zip(samples, tok.encode_samples(samples), strict=True):
            expected[s.corpus][s.doc_id] = (ids.tolist(), [0] * loss_start + [1] * (len(ids) - loss_start))
    for corpus in (SFT, CPT):
        assert _documents(tmp_path, corpus) == expected[corpus]
    rl = [
        json.loads(x) for f in sorted((tmp_path / "rl").rglob("*.jsonl")) for x in f.read_text().splitlines()
    ]
    assert len(rl) == sum(len(t.steps) for _, t in pairs)
    assert not list(tmp_path.rglob("*.tmp-*"))


def test_shard_files_do_not_depend_on_input_order(recorded, tmp_path):
    pairs = _pairs(recorded)
    for name, order in (("a", pairs), ("b", pairs[::-1])):
        with pipeline() as p:
            _ = p | beam.Create(order) | BuildShards(str(tmp_path / name), CORPORA, seq_len=4096, shards=2)
    a = {f.relative_to(tmp_path / "a"): f.read_bytes() for f in (tmp_path / "a").rglob("*") if f.is_file()}
    b = {f.relative_to(tmp_path / "b"): f.read_bytes() for f in (tmp_path / "b").rglob("*") if f.is_file()}
    assert a == b and a
    assert np.all(
        [
            len(ids) <= 4096
            for f in (tmp_path / "a/sft").rglob("*.parquet")
            for ids in pq.read_table(f).column("input_ids").to_pylist()
        ]
    )

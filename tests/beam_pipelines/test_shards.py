"""The fused shard builder the pipeline runs: the formatter's texts, the tokeniser's ids, every sample."""

from __future__ import annotations

import json
import shutil

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.stages.common import CORPORA, CPT, SFT
from beam_pipelines.stages.format import Formatter
from beam_pipelines.stages.park import parked_root
from beam_pipelines.stages.shards import BuildShards
from schemas.chat_tokens import shared_tokenizer
from tests.beam_pipelines.conftest import documents, parked, pipeline


def _pairs(recorded):
    return [("test" if i % 4 == 0 else "train", t) for i, t in enumerate(recorded)]


def test_shards_hold_every_sample_with_the_tokeniser_ids(recorded, tmp_path):
    pairs = _pairs(recorded)
    with pipeline() as p:
        out = parked(p, pairs, tmp_path) | BuildShards(
            str(tmp_path), CORPORA, seq_len=32768, shards=2, chunk=3
        )
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
                    "agentworldbench/tasks/terminal_test.jsonl",
                ]
            ),
            label="Files",
        )
    formatter = Formatter(CORPORA, None, 32768, 2)
    tok = shared_tokenizer(None)
    expected = {SFT: {}, CPT: {}}
    for split, t in pairs:
        samples = [o.value for o in formatter.format(split, t) if o.tag in (SFT, CPT)]
        for s, (ids, loss_start, history) in zip(samples, tok.encode_samples(samples), strict=True):
            mask = [0] * loss_start + [1] * (len(ids) - loss_start)
            for a, b in history:
                mask[a:b] = [1] * (b - a)
            expected[s.corpus][s.doc_id] = (ids.tolist(), mask)
    for corpus in (SFT, CPT):
        assert documents(tmp_path, corpus) == expected[corpus]
    rl = [
        json.loads(x) for f in sorted((tmp_path / "rl").rglob("*.jsonl")) for x in f.read_text().splitlines()
    ]
    assert len(rl) == sum(len(t.steps) for _, t in pairs)
    assert not list(tmp_path.rglob("*.tmp-*"))


def test_shard_files_do_not_depend_on_input_order(recorded, tmp_path):
    pairs = _pairs(recorded)
    for name, order in (("a", pairs), ("b", pairs[::-1])):
        with pipeline() as p:
            root = tmp_path / name
            _ = parked(p, order, root) | BuildShards(str(root), CORPORA, seq_len=4096, shards=2)
    for name in ("a", "b"):
        shutil.rmtree(parked_root(str(tmp_path / name)))
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


def test_dropped_trajectories_and_second_records_of_an_id_are_skipped(recorded, tmp_path):
    kept, dropped, twice = recorded[:3]
    pairs = [("train", t) for t in (kept, dropped, twice, twice)]
    with pipeline() as p:
        drops = p | "Drops" >> beam.Create(
            [(dropped.trajectory_id, ("near_duplicate", kept.trajectory_id, 0.9))]
        )
        out = parked(p, pairs, tmp_path) | BuildShards(str(tmp_path), (CPT,), seq_len=32768, drops=drops)
        assert_that(
            out[DEAD_LETTER] | beam.Map(lambda d: (d.stage, d.reason, d.trajectory_id)),
            equal_to([("dedup", "duplicate_id", twice.trajectory_id)]),
        )
    doc_ids = documents(tmp_path, CPT)
    assert {d.split("#")[0] for d in doc_ids} == {kept.trajectory_id, twice.trajectory_id}, sorted(doc_ids)

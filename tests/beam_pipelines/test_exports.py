"""Exports of a real corpus: Megatron-LM indexed datasets read by megatron-core's own reader, and a Hub
folder read by `datasets.load_dataset`, both checked against the corpus and its manifest.json."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from datasets import load_dataset

# megatron-core takes ~10 s to import: once for the module
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

from beam_pipelines.build_corpus import main as build_corpus
from beam_pipelines.exports.__main__ import main as export
from beam_pipelines.exports.card import hub_license
from beam_pipelines.exports.indexed import IndexedDatasetWriter, token_dtype
from schemas import Source
from tests.beam_pipelines.conftest import write_dataset
from tests.schemas.mcp_swe_records import mcp_trajectory

TOKEN_CORPORA = ("cpt", "sft")
IMPORTED = {  # index in the recorded fixture -> where it "came from"
    0: Source("example/terminal-logs", "asciinema", "row-0", "v1", "CC-BY-4.0", "hf://example/terminal-logs"),
    1: Source("example/terminal-logs", "asciinema", "row-1", "v1", "CC-BY-4.0", "hf://example/terminal-logs"),
    2: Source("example/terminal-logs", "asciinema", "row-2", "v1", "CC-BY-4.0", "hf://example/terminal-logs"),
    3: Source("example/shell-sessions", "jsonl", "s.jsonl:4", license="MIT"),
    4: Source("example/shell-sessions", "jsonl", "s.jsonl:5", license="MIT"),
}


def _mcp(i: int):
    t = mcp_trajectory(f"mcp-{i:04d}", when=f"2026-11-{10 + i}T0{i}:15:00+01:00", entity_id=f"e-{i}{i}a")
    t.task.id = f"mcp-task-{i}"
    return t


@pytest.fixture(scope="module")
def corpus(recorded, tmp_path_factory) -> Path:
    """A small real corpus: the recorded terminal fixture (five marked as imported under two licences)
    plus MCP trajectories, so two domains; seq_len 2048 so a few documents are cut into chunks."""
    root = tmp_path_factory.mktemp("exports")
    trajectories = []
    for i, t in enumerate(recorded):
        t = copy.deepcopy(t)
        t.provenance.source = IMPORTED.get(i)
        trajectories.append(t)
    raw = write_dataset(root / "raw", [*trajectories, *(_mcp(i) for i in range(1, 4))])
    out = root / "corpus"
    args = ["--input", str(raw), "--output", str(out), "--split-ratios", "0.5,0.25,0.25", "--shards", "2"]
    args += ["--seq-len", "2048", "--direct_num_workers=1", "--direct_running_mode=in_memory"]
    assert build_corpus(args) == 0
    return out


@pytest.fixture(scope="module")
def manifest(corpus) -> dict:
    return json.loads((corpus / "manifest.json").read_text())


@pytest.fixture(scope="module")
def megatron_out(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("megatron")
    assert export(["megatron", "--corpus", str(corpus), "--out", str(out), "--no-progress"]) == 0
    return out


@pytest.fixture(scope="module")
def hub_out(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hub")
    assert export(["hub", "--corpus", str(corpus), "--out", str(out), "--name", "me/agentworld-small"]) == 0
    return out


def _corpus_documents(corpus: Path, name: str, split: str) -> list[tuple[list[int], list[int]]]:
    """(tokens, loss mask) of every document of one corpus and split, in the export's order: files by
    path (domains alphabetically, shards in order), rows in order, documents in row order."""
    docs = []
    for f in sorted((corpus / name / split).glob("*.parquet")):
        for row in pq.read_table(f).to_pylist():
            at = 0
            for n in row["doc_lengths"]:
                docs.append((row["input_ids"][at : at + n], row["loss_mask"][at : at + n]))
                at += n
    return docs


def _totals(manifest: dict, name: str, split: str) -> dict[str, int]:
    totals = {"rows": 0, "documents": 0, "tokens": 0, "loss_tokens": 0}
    for f in manifest["files"]:
        if f["corpus"] == name and f["split"] == split:
            for key in totals:
                totals[key] += f.get(key, 0)
    return totals


def _token_groups(manifest: dict) -> list[tuple[str, str]]:
    return sorted({(f["corpus"], f["split"]) for f in manifest["files"] if f["corpus"] in TOKEN_CORPORA})


def test_corpus_counts_trajectories_by_origin(corpus) -> None:
    stages = json.loads((corpus / "report.json").read_text())["stages"]
    assert stages["sources"] == {
        "captured": stages["validate"]["valid"] - len(IMPORTED),
        "dataset.example/shell-sessions": 2,
        "dataset.example/terminal-logs": 3,
        "license.CC-BY-4.0": 3,
        "license.MIT": 2,
    }


def test_megatron_reader_reads_every_export(corpus, manifest, megatron_out) -> None:
    groups = _token_groups(manifest)
    assert {c for c, _ in groups} == set(TOKEN_CORPORA) and len(groups) >= 4
    assert {f["domain"] for f in manifest["files"] if f["corpus"] == "sft"} == {"mcp", "terminal"}
    exported = json.loads((megatron_out / "export.json").read_text())
    by_group = {(d["corpus"], d["split"]): d for d in exported["datasets"]}
    assert sorted(by_group) == groups
    for name, split in groups:
        totals = _totals(manifest, name, split)
        expected = _corpus_documents(corpus, name, split)
        prefix = megatron_out / name / split / f"{name}_{split}_text_document"
        dataset = IndexedDataset(str(prefix))
        assert dataset.index.dtype == np.int32  # the Qwen3 vocabulary does not fit uint16
        assert len(dataset) == len(expected) == totals["documents"] == by_group[name, split]["documents"]
        assert list(dataset.document_indices) == list(range(len(expected) + 1))
        for i, (tokens, _) in enumerate(expected):
            assert dataset[i].tolist() == tokens, f"{name}/{split} document {i}"
        assert int(dataset.sequence_lengths.sum()) == totals["tokens"] == by_group[name, split]["tokens"]
        if name != "sft":
            assert not prefix.with_name(f"{name}_{split}_loss_mask_document.idx").exists()
            continue
        mask = IndexedDataset(str(prefix.with_name(f"{name}_{split}_loss_mask_document")))
        assert mask.index.dtype == np.uint8
        assert np.array_equal(mask.sequence_lengths, dataset.sequence_lengths)
        assert np.array_equal(mask.document_indices, dataset.document_indices)
        for i, (_, losses) in enumerate(expected):
            assert mask[i].tolist() == losses
        assert sum(int(mask[i].sum()) for i in range(len(mask))) == totals["loss_tokens"]
    # SFT masks the prompt, so a mask of all ones would have failed above
    assert all(f["loss_tokens"] < f["tokens"] for f in manifest["files"] if f["corpus"] == "sft")


def test_megatron_absent_split_is_an_empty_dataset(corpus, tmp_path, capsys) -> None:
    out = tmp_path / "m"
    args = ["megatron", "--corpus", str(corpus), "--out", str(out), "--corpora", "cpt", "--no-progress"]
    args += ["--splits", "test,holdout"]
    # SmolLM2's vocabulary size: too small for the Qwen3 ids in this corpus
    assert export([*args, "--vocab-size", "49152"]) == 2
    assert "--vocab-size 49152 is too small" in capsys.readouterr().err
    assert export([*args, "--vocab-size", "151936"]) == 0
    assert "| cpt | holdout | 0 | 0 | 0 |" in capsys.readouterr().out
    assert len(IndexedDataset(str(out / "cpt/test/cpt_test_text_document"))) > 0
    # Megatron's mmap reader cannot map an empty .bin (its own builder writes the same): read it plainly
    empty = IndexedDataset(str(out / "cpt/holdout/cpt_holdout_text_document"), mmap=False)
    assert len(empty) == 0 and list(empty.document_indices) == [0] and empty.index.dtype == np.int32
    assert not (out / "sft").exists() and not (out / "cpt/train").exists()


def test_hub_folder_loads_with_datasets(corpus, manifest, hub_out, tmp_path) -> None:
    card = (hub_out / "README.md").read_text()
    front = yaml.safe_load(card.split("---\n")[1])
    assert front["license"] == ["cc-by-4.0", "mit", "other"]  # captured trajectories: no licence given
    for named in ("CC-BY-4.0", "MIT", "example/terminal-logs", "example/shell-sessions"):
        assert named in card
    assert manifest["config"]["tokenizer_sha256"] in card and "--name me/agentworld-small" in card
    configs = {c["config_name"]: c for c in front["configs"]}
    assert sorted(configs) == ["agentworldbench", "cpt", "rl", "sft"]
    info = {
        c["config_name"]: {s["name"]: s["num_examples"] for s in c["splits"]} for c in front["dataset_info"]
    }
    for name in TOKEN_CORPORA:
        loaded = load_dataset(str(hub_out), name, cache_dir=str(tmp_path / "cache"))
        assert sorted(loaded) == sorted({s for c, s in _token_groups(manifest) if c == name})
        for split, rows in loaded.items():
            totals = _totals(manifest, name, split)
            assert rows.num_rows == totals["rows"] == info[name][split]
            lengths = [n for row in rows["doc_lengths"] for n in row]
            assert len(lengths) == totals["documents"] and sum(lengths) == totals["tokens"]
            assert sum(len(ids) for ids in rows["input_ids"]) == totals["tokens"]
            assert sum(sum(m) for m in rows["loss_mask"]) == totals["loss_tokens"]
            assert set(rows["domain"]) <= {"mcp", "terminal"}
    rl = load_dataset(str(hub_out), "rl", cache_dir=str(tmp_path / "cache"))
    for split, rows in rl.items():
        assert rows.num_rows == _totals(manifest, "rl", split)["documents"] == info["rl"][split]
    originals = {
        r["id"]: r
        for f in (corpus / "rl").rglob("*.jsonl")
        for r in map(json.loads, f.read_text().splitlines())
    }
    for row in rl["test"]:
        original = originals[row["id"]]
        assert row["messages"] == original["messages"] and row["reference"] == original["reference"]
        assert json.loads(row["reference_data"]) == original["reference_data"]
        assert json.loads(row["action"]) == original["action"] and row["extra"] is None
    bench = load_dataset(str(hub_out), "agentworldbench", split="test", cache_dir=str(tmp_path / "cache"))
    expected = sum(f["documents"] for f in manifest["files"] if f["path"].endswith("_test.jsonl"))
    expected -= sum(
        f["documents"] for f in manifest["files"] if f["path"].startswith("agentworldbench/tasks/")
    )
    assert bench.num_rows == expected == info["agentworldbench"]["test"]
    assert set(bench["task"]) == {"mcp", "terminal"}
    assert all(r["response"][r["turn_idx"] - 1].startswith("**Environment Observation:**") for r in bench)


def test_licence_of_the_card() -> None:
    found = {"licenses": {"MIT": 2, "CC-BY-4.0": 1}, "datasets": {}, "captured": 0}
    assert hub_license(found, None) == ["cc-by-4.0", "mit"]
    assert hub_license({**found, "licenses": {"MIT": 2}}, None) == "mit"
    assert hub_license({**found, "licenses": {"MIT": 2}, "captured": 3}, "mit") == "mit"
    assert hub_license({**found, "licenses": {"unknown": 1}}, None) == "other"  # no licence on the card
    assert hub_license({**found, "licenses": {"LicenseRef-Custom": 1}}, None) == "other"
    assert hub_license(None, None) == "other"  # a corpus built before the counters


def test_refusals(corpus, tmp_path, capsys) -> None:
    unfinished = tmp_path / "unfinished"
    shutil.copytree(corpus / "cpt", unfinished / "cpt")  # files but no manifest: a killed build
    for command in ("megatron", "hub"):
        assert export([command, "--corpus", str(unfinished), "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert "no manifest.json" in err and "python -m beam_pipelines.build_corpus" in err
    out = tmp_path / "busy"
    out.mkdir()
    (out / "stale.bin").write_bytes(b"earlier")
    args = ["megatron", "--corpus", str(corpus), "--out", str(out), "--corpora", "cpt", "--no-progress"]
    assert export(args) == 2
    assert "--overwrite" in capsys.readouterr().err and (out / "stale.bin").exists()
    assert export([*args, "--overwrite"]) == 0
    assert not (out / "stale.bin").exists() and (out / "export.json").exists()
    assert export(["megatron", "--corpus", str(corpus), "--out", str(corpus / "cpt")]) == 2
    assert "overlaps the corpus" in capsys.readouterr().err


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
@pytest.mark.parametrize("lengths", [[5, 0, 17, 3], []], ids=["documents", "empty"])
def test_indexed_writer_matches_megatron(tmp_path, dtype, lengths) -> None:
    rng = np.random.default_rng(7)
    high = 65_000 if dtype == np.uint16 else 150_000
    docs = [rng.integers(0, high, size=n) for n in lengths]
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    with IndexedDatasetWriter(ours, dtype) as writer:
        for doc in docs:
            writer.add(doc)
    builder = IndexedDatasetBuilder(f"{theirs}.bin", dtype=dtype)
    for doc in docs:
        builder.add_document(torch.tensor(doc), [len(doc)])
    builder.finalize(f"{theirs}.idx")
    for ext in ("bin", "idx"):
        assert Path(f"{ours}.{ext}").read_bytes() == Path(f"{theirs}.{ext}").read_bytes(), ext
    dataset = IndexedDataset(ours, mmap=bool(lengths))
    assert dataset.index.dtype == dtype and len(dataset) == len(docs)
    assert [dataset[i].tolist() for i in range(len(docs))] == [d.tolist() for d in docs]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours.bin", "ours.idx", "theirs.bin", "theirs.idx"]


def test_indexed_writer_rules(tmp_path) -> None:
    assert token_dtype(49_152) == np.uint16 and token_dtype(65_499) == np.uint16
    assert token_dtype(65_500) == np.int32 and token_dtype(151_936) == np.int32
    with (
        pytest.raises(ValueError, match="do not fit uint16"),
        IndexedDatasetWriter(str(tmp_path / "d"), np.uint16) as w,
    ):
        w.add(np.array([1, 70_000]))
    with pytest.raises(RuntimeError), IndexedDatasetWriter(str(tmp_path / "d"), np.int32) as w:
        w.add(np.arange(10))
        raise RuntimeError("killed mid-export")
    assert list(tmp_path.iterdir()) == []  # neither file, and no temporary left

"""End to end: the real recorded fixture, plus planted secrets, a corrupt file and an invalid row."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import load_dataset

from beam_pipelines.build_corpus import OUTPUT_DIRS, main
from beam_pipelines.memory import few_malloc_arenas
from schemas import TRAJECTORY_SCHEMA, to_row
from schemas.chat_tokens import shared_tokenizer
from schemas.render import AGENTWORLDBENCH_FIELDS
from tests.beam_pipelines.conftest import variant, write_dataset

AWS_KEY = "AKIAZ3MHEXAMPLE7QK2B"
GITHUB_TOKEN = "ghp_" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"
KEY_LINE = "MIIEpAIBAAKCAQEA1vX9qL3mK8nR2sT5uW7yZ0aB4cD6eF8gH1iJ3kL5mN7oP9q"
EMAIL = "ops.lead@example-corp.com"
PLANTED = (AWS_KEY, GITHUB_TOKEN, KEY_LINE, EMAIL)


def _plant(t) -> None:
    key = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_LINE}\n-----END RSA PRIVATE KEY-----"
    t.steps[0].observation.text += f"\n$ env | grep AWS\nAWS_ACCESS_KEY_ID={AWS_KEY}\n$"
    t.steps[
        1
    ].observation.text += (
        f"\n$ cat ~/.ssh/id_rsa\n{key}\n$ git remote -v\nhttps://{GITHUB_TOKEN}@github.com/x/y"
    )
    t.steps[-1].observation.text += f"\nmail sent to {EMAIL}\n$"


@pytest.fixture(scope="module")
def runs(recorded, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("corpus")
    raw = write_dataset(root / "raw", [*recorded[1:], variant(recorded[0], "planted-0001", _plant)])
    shard_dir = next(raw.rglob("*.parquet")).parent
    (shard_dir / "corrupt.parquet").write_bytes(b"PAR1 this is not a parquet file")
    bad = to_row(variant(recorded[1], "bad-domain-0001"))
    bad["domain"] = "fax"
    pq.write_table(pa.Table.from_pylist([bad], schema=TRAJECTORY_SCHEMA), shard_dir / "invalid.parquet")
    args = [
        "--input",
        f"{shard_dir}/*.parquet",
        "--split-ratios",
        "0.5,0.25,0.25",
        "--shards",
        "2",
        "--seq-len",
        "4096",
    ]
    # the default local set-up (worker processes) and a single in-process worker must agree byte for byte
    assert main([*args, "--output", str(root / "a")]) == 0
    assert (
        main(
            [*args, "--output", str(root / "b"), "--direct_num_workers=1", "--direct_running_mode=in_memory"]
        )
        == 0
    )
    return root / "a", root / "b"


def _files(root: Path) -> dict[str, bytes]:
    return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()}


def test_layout_and_determinism(runs):
    a, b = runs
    for name in (*OUTPUT_DIRS, "report.md", "report.json", "manifest.json"):
        assert (a / name).exists(), name
    files_a, files_b = _files(a), _files(b)
    assert sorted(files_a) == sorted(files_b)
    assert [n for n in files_a if files_a[n] != files_b[n]] == []
    manifest = json.loads(files_a["manifest.json"])
    assert {f["path"] for f in manifest["files"]} == {
        n for n in files_a if n.endswith((".parquet", ".jsonl"))
    }


def test_bad_input_is_in_the_dead_letter_and_the_rest_is_written(runs, recorded):
    a, _ = runs
    read = [json.loads(x) for x in (a / "dead_letter/read.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in read] == ["corrupt_file"] and read[0]["source"].endswith("corrupt.parquet")
    invalid = [json.loads(x) for x in (a / "dead_letter/validate.jsonl").read_text().splitlines()]
    assert [d["trajectory_id"] for d in invalid] == ["bad-domain-0001"]
    report = json.loads((a / "report.json").read_text())
    cpt_documents = sum(g["documents"] for g in report["outputs"]["cpt"].values())
    assert cpt_documents == report["stages"]["dedup"]["kept"]
    assert not (a / ".parked").exists()  # the run's parked trajectories are gone with it


def test_no_planted_secret_reaches_any_output(runs):
    a, _ = runs
    tok = shared_tokenizer(None)
    texts = [p.read_text() for p in a.rglob("*") if p.suffix in (".jsonl", ".json", ".md")]
    for shard in a.rglob("*.parquet"):
        for ids in pq.read_table(shard, columns=["input_ids"]).column("input_ids").to_pylist():
            texts.append(tok.tokenizer.decode(ids, skip_special_tokens=False))
    assert any("<REDACTED" in t for t in texts)
    for secret in PLANTED:
        assert not any(secret in t for t in texts), secret


def test_agentworldbench_file_fields_and_markup(runs):
    a, _ = runs
    lines = (a / "agentworldbench/terminal_test.jsonl").read_text().splitlines()
    assert lines
    for line in lines:
        r = json.loads(line)
        assert tuple(r) == AGENTWORLDBENCH_FIELDS
        assert len(r["prompt"]) == len(r["response"]) == r["turn_idx"] <= r["total_turns"]
        assert all(p.startswith(f"### Turn {k}\n\n**Action:**\n") for k, p in enumerate(r["prompt"], start=1))
        assert all(x.startswith("**Environment Observation:**\n") for x in r["response"])
        assert r["current_prompt"] == r["prompt"][-1] and r["task"] == "terminal"


def test_token_shards_load_with_datasets(runs):
    a, _ = runs
    for corpus in ("sft", "cpt"):
        files = sorted(str(f) for f in (a / corpus).rglob("*.parquet"))
        rows = load_dataset("parquet", data_files=files, split="train")
        assert all(len(r) <= 4096 for r in rows["input_ids"])
        assert sum(sum(m) for m in rows["loss_mask"]) > 0


def test_workers_start_with_few_malloc_arenas_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    few_malloc_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == "2"  # inherited by the SDK worker processes
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    few_malloc_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == "4"

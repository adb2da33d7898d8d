from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.training.conftest import OFFLINE, ROOT
from training.loop import TrainConfig, build_parser, main, train


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=OFFLINE, capture_output=True, text=True, timeout=timeout
    )


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_help_shows_cpu_ddp_and_fsdp_examples() -> None:
    text = build_parser("sft").format_help()
    assert "torchrun --nproc-per-node 8 -m training.sft" in text and "--fsdp" in text and "--resume" in text


def test_cpt_cli_on_the_pipeline_corpus_trains_saves_and_resumes(
    pipeline_corpus: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cpt"
    common = [
        "-m",
        "training.cpt",
        "--data",
        str(pipeline_corpus),
        "--base",
        "qwen3-tiny",
        "--out",
        str(out),
    ]
    common += ["--batch-size", "1", "--eval-every", "3", "--eval-batches", "2", "--warmup-steps", "1"]
    done = run(*common, "--max-steps", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cpt finished: 3 steps" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stage"] == "cpt" and summary["tokens"] > 0 and summary["val_loss"] > 0
    records = lines(out / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3] and "val_loss" in records[-1]
    checkpoint = out / "checkpoint-000003"
    model = AutoModelForCausalLM.from_pretrained(checkpoint, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, local_files_only=True)
    assert model.config.architectures == ["Qwen3ForCausalLM"] and tokenizer.chat_template
    # a crash after step 3's checkpoint left a record of a step 4 that no checkpoint holds
    with open(out / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 4, "loss": 99.0}) + "\n")
    # the same entry point in this process (saves a second interpreter start)
    assert main("cpt", [*common[2:], "--max-steps", "4", "--resume"]) == 0
    resumed = lines(out / "metrics.jsonl")
    assert [r["step"] for r in resumed] == [1, 2, 3, 4] and resumed[-1]["loss"] < 99
    assert (out / "checkpoint-000004" / "model.safetensors").exists()


def test_missing_corpus_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main("sft", ["--data", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 2
    assert "build_corpus" in capsys.readouterr().err


def test_torchrun_ddp_on_two_processes_matches_one_process(tiny_corpus: Path, tmp_path: Path) -> None:
    # 2 ranks x 1 row take the same rows as 1 process x 2 rows (rank r takes order[r::2])
    args = ["--data", str(tiny_corpus), "--model", "qwen3-tiny", "--max-steps", "2", "--warmup-steps", "1"]
    args += ["--lr", "1e-2", "--device", "cpu", "--skip-tokenizer-check"]  # hand-written token ids
    ddp = tmp_path / "ddp"
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    done = run(*torchrun, "-m", "training.sft", *args, "--out", str(ddp), "--batch-size", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    single = tmp_path / "single"
    train(
        TrainConfig(
            data=str(tiny_corpus),
            out=str(single),
            base="qwen3-tiny",
            max_steps=2,
            warmup_steps=1,
            lr=1e-2,
            batch_size=2,
            device="cpu",
            skip_tokenizer_check=True,
        )
    )
    for a, b in zip(lines(ddp / "metrics.jsonl"), lines(single / "metrics.jsonl"), strict=True):
        assert abs(a["loss"] - b["loss"]) < 1e-5 and a["tokens"] == b["tokens"]
    assert json.loads((ddp / "summary.json").read_text())["world_size"] == 2

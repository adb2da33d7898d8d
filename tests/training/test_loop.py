from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from training.data import IGNORE_INDEX, PackedDataset, collate
from training.loop import TrainConfig, lr_factor, train, weighted_loss_sum
from training.models import build_model


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def config(corpus: Path, out: Path, **overrides: object) -> TrainConfig:
    base = dict(data=str(corpus), out=str(out), base="qwen3-tiny", max_steps=4, batch_size=2, lr=1e-2)
    base.update(warmup_steps=2, eval_every=100, save_every=100, seed=0)
    base.update(skip_tokenizer_check=True)  # hand-written token ids: no tokenizer made them
    base.update(overrides)
    return TrainConfig(**base)  # type: ignore[arg-type]


def test_schedule_warms_up_then_decays_to_the_floor() -> None:
    factors = [lr_factor(s, warmup=4, total=20, min_ratio=0.1) for s in range(20)]
    assert factors[:4] == [0.25, 0.5, 0.75, 1.0]
    assert all(a >= b for a, b in zip(factors[3:], factors[4:], strict=False))
    assert lr_factor(20, 4, 20, 0.1) == pytest.approx(0.1)


def test_weighted_loss_matches_transformers_own_shifted_loss(tiny_corpus: Path) -> None:
    # an independent check of the label convention: HF shifts labels itself, so it gets the unshifted ids
    model = build_model("qwen3-tiny").eval()
    ds = PackedDataset(str(tiny_corpus / "sft"))
    batch = collate([ds.row(0), ds.row(1)], echo_weight=1.0)
    hf_labels = torch.full_like(batch.input_ids, IGNORE_INDEX)
    hf_labels[:, 1:] = torch.where(batch.loss_weight[:, :-1] > 0, batch.input_ids[:, 1:], IGNORE_INDEX)
    with torch.no_grad():
        ours = weighted_loss_sum(model, batch, bf16=False) / batch.loss_weight.sum()
        theirs = model(input_ids=batch.input_ids, position_ids=batch.position_ids, labels=hf_labels).loss
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    # echo documents weigh echo_weight: a different weight gives a different loss
    echo = collate([ds.row(0), ds.row(1)], echo_weight=0.0)
    assert 0 < echo.loss_weight.sum() < batch.loss_weight.sum()


def test_loss_falls_when_overfitting_a_tiny_corpus(tiny_corpus: Path, tmp_path: Path) -> None:
    summary = train(config(tiny_corpus, tmp_path / "run", max_steps=20, lr=2e-2, warmup_steps=3))
    losses = [m["loss"] for m in metrics(tmp_path / "run")]
    assert len(losses) == 20 and summary["steps"] == 20
    assert losses[0] > 11.0  # ln(151,669) = 11.93: a random model
    assert summary["last_loss"] < 0.5 * losses[0] and summary["val_loss"] < 0.6 * losses[0]
    assert all(m["tokens_per_s"] > 0 and m["grad_norm"] > 0 for m in metrics(tmp_path / "run"))


def test_resume_gives_the_same_losses_as_an_uninterrupted_run(tiny_corpus: Path, tmp_path: Path) -> None:
    # batch 3 x grad_accum 2 over 8 rows: the checkpoint at k=2 falls in the middle of the second epoch
    whole = tmp_path / "whole"
    summary = train(config(tiny_corpus, whole, batch_size=3, grad_accum=2, save_every=2))
    assert (whole / "checkpoint-000002" / "trainer_state.pt").exists()
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(whole / "checkpoint-000002", resumed / "checkpoint-000002")
    again = train(config(tiny_corpus, resumed, batch_size=3, grad_accum=2, save_every=2, resume=True))
    assert again["resumed_from"].endswith("checkpoint-000002") and again["steps"] == 4
    want, got = metrics(whole)[2:], metrics(resumed)
    assert [m["step"] for m in got] == [3, 4]
    # step 3 is a forward pass of the saved weights: exact everywhere. Later steps are exact on CPU;
    # CUDA attention backward accumulates with atomics, so there they agree to bf16 noise only.
    later = 1e-3 if torch.cuda.is_available() else 1e-6
    for a, b, tolerance in zip(want, got, (1e-6, later), strict=True):
        assert abs(a["loss"] - b["loss"]) < tolerance and abs(a["lr"] - b["lr"]) < 1e-12
    assert abs(summary["val_loss"] - again["val_loss"]) < later
    # the final checkpoints are the same model, and transformers loads them on its own
    one = AutoModelForCausalLM.from_pretrained(whole / "checkpoint-000004", local_files_only=True)
    two = AutoModelForCausalLM.from_pretrained(resumed / "checkpoint-000004", local_files_only=True)
    if not torch.cuda.is_available():  # Adam turns bf16 noise in near-zero gradients into lr-sized steps
        for (name, p), q in zip(one.state_dict().items(), two.state_dict().values(), strict=True):
            torch.testing.assert_close(p, q, atol=1e-6, rtol=0, msg=name)


def test_accumulation_normalises_over_the_whole_batch(tiny_corpus: Path, tmp_path: Path) -> None:
    # on the CPU in fp32 on any machine: this checks the arithmetic, not a device's rounding
    one = train(config(tiny_corpus, tmp_path / "b2", max_steps=2, batch_size=2, grad_accum=1, device="cpu"))
    two = train(config(tiny_corpus, tmp_path / "a2", max_steps=2, batch_size=1, grad_accum=2, device="cpu"))
    for a, b in zip(metrics(tmp_path / "b2"), metrics(tmp_path / "a2"), strict=True):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    assert one["tokens"] == two["tokens"] == 2 * 2 * 32


def test_train_layers_changes_only_the_top_layers(tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "top"
    summary = train(config(tiny_corpus, out, train_layers=1, max_steps=2, save_every=2))
    before, after = build_model("qwen3-tiny").state_dict(), build_model(summary["checkpoint"]).state_dict()
    changed = {name for name in before if not before[name].equal(after[name])}
    assert changed and all(n.startswith(("model.layers.1.", "model.norm.")) for n in changed), changed
    assert summary["parameters"]["trained"] < summary["parameters"]["total"] / 10
    with pytest.raises(ValueError, match="--train-layers must be between 1 and 2"):
        train(config(tiny_corpus, tmp_path / "bad", train_layers=3))

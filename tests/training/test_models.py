from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from training.data import collate
from training.models import SHAPES, build_model, model_flops_per_token, parameter_counts
from training.tokenizer import load_tokenizer


def test_tiny_model_covers_the_whole_qwen3_tokenizer() -> None:
    tokenizer = load_tokenizer()
    model = build_model("qwen3-tiny")
    assert model.config.vocab_size == len(tokenizer) == 151_669
    assert (
        model.config.eos_token_id == tokenizer.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
    )
    assert tokenizer.convert_tokens_to_ids("<think>") < model.config.vocab_size
    assert tokenizer.chat_template is not None


def test_qwen3_0_6b_has_the_published_size() -> None:
    counts = parameter_counts(build_model("qwen3-0.6b", device="meta"))
    # Qwen3-0.6B: 0.6B parameters, 0.44B of them outside the (tied) embedding
    assert 0.59e9 < counts["total"] < 0.61e9
    assert 0.43e9 < counts["non_embedding"] < 0.45e9
    small = parameter_counts(build_model("qwen3-small", device="meta"))
    assert 20e6 <= small["non_embedding"] <= 40e6


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_flops_per_token_counts_every_matmul_weight(name: str) -> None:
    model = build_model(name, device="meta")
    c = model.config
    counts = parameter_counts(model)
    # the 6N term: every non-embedding parameter plus the output projection (a matmul even when tied)
    assert model_flops_per_token(c, 0) == 6 * (counts["non_embedding"] + c.vocab_size * c.hidden_size)
    attention = model_flops_per_token(c, 2048) - model_flops_per_token(c, 0)
    assert attention == 12 * c.num_hidden_layers * c.num_attention_heads * c.head_dim * 2048


def test_packed_rows_attend_within_each_document_only() -> None:
    model = build_model("qwen3-tiny", seed=1).eval()
    a, b = torch.arange(100, 109), torch.arange(500, 506)
    row = {
        "input_ids": torch.cat([a, b]),
        "loss_mask": torch.ones(15, dtype=torch.int8),
        "doc_lengths": torch.tensor([9, 6]),
        "doc_echo": torch.tensor([False, False]),
    }
    batch = collate([row])
    with torch.no_grad():
        packed = model(input_ids=batch.input_ids, position_ids=batch.position_ids, use_cache=False).logits[0]
        alone_b = model(input_ids=b[None], use_cache=False).logits[0]
        alone_a = model(input_ids=a[None], use_cache=False).logits[0]
        # without position_ids the second document would see the first: the logits must differ
        leaky = model(input_ids=batch.input_ids, use_cache=False).logits[0]
    torch.testing.assert_close(packed[:9], alone_a, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(packed[9:], alone_b, atol=1e-5, rtol=1e-4)
    assert (leaky[9:] - alone_b).abs().max() > 1e-3


def test_checkpoint_directory_round_trip(tmp_path: Path) -> None:
    model = build_model("qwen3-tiny", seed=2)
    model.save_pretrained(tmp_path)
    loaded = build_model(str(tmp_path))
    also = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        want = model(input_ids=ids).logits
        torch.testing.assert_close(loaded(input_ids=ids).logits, want, atol=0, rtol=0)
        torch.testing.assert_close(also(input_ids=ids).logits, want, atol=0, rtol=0)
    assert build_model("qwen3-tiny", seed=2).state_dict()["lm_head.weight"].equal(model.lm_head.weight)


def test_unknown_model_names_the_choices() -> None:
    with pytest.raises(ValueError, match="qwen3-small"):
        build_model("qwen3-huge")

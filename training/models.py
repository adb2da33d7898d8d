"""World models through `transformers`: a local checkpoint, or a named Qwen3 shape with random weights.

Named shapes exist so that CPU runs, tests and GPU benchmarks need no download: nothing here loads
from a model hub. The model knows nothing of parallelism; `training.distributed` wraps it.
"""

from __future__ import annotations

import os

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, Qwen3Config, Qwen3ForCausalLM

QWEN3_VOCAB = 151_669  # the Qwen3 tokenizer: 151,643 BPE tokens + 26 added tokens
QWEN3_EOS, QWEN3_PAD = 151_645, 151_643  # <|im_end|>, <|endoftext|>

_COMMON = dict(
    hidden_act="silu",
    rms_norm_eps=1e-6,
    rope_theta=1_000_000.0,
    max_position_embeddings=40_960,
    tie_word_embeddings=True,
    bos_token_id=QWEN3_PAD,
    eos_token_id=QWEN3_EOS,
    pad_token_id=QWEN3_PAD,
    attention_bias=False,
    use_cache=False,  # a cache in training also turns off packed-sequence (per-document) attention masks
)

# One row a named shape, its columns in the order of _SHAPE_FIELDS.
_SHAPE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
)
_SHAPE_ROWS = {
    # tests: a few seconds per step on a 2-core CPU; the tied embedding is most of its 10M parameters
    "qwen3-tiny": (QWEN3_VOCAB, 64, 2, 4, 2, 16, 192),
    # CPU demo runs: ~25M non-embedding parameters
    "qwen3-small": (QWEN3_VOCAB, 512, 8, 8, 4, 64, 1536),
    # the published Qwen3-0.6B shape (its vocab_size is padded to 151,936 for GPU-friendly matmuls)
    "qwen3-0.6b": (151_936, 1024, 28, 16, 8, 128, 3072),
}
SHAPES: dict[str, dict] = {
    name: dict(zip(_SHAPE_FIELDS, row, strict=True)) for name, row in _SHAPE_ROWS.items()
}


def qwen3_config(name: str, **overrides: object) -> Qwen3Config:
    if name not in SHAPES:
        raise ValueError(
            f"unknown model shape {name!r}: use one of {sorted(SHAPES)} or a checkpoint directory"
        )
    return Qwen3Config(**{**_COMMON, **SHAPES[name], **overrides})


def resolve_checkpoint(path: str) -> str:
    """A training run directory stands for its latest checkpoint, so `--model RUN_DIR` works everywhere."""
    if not os.path.isdir(path) or os.path.exists(os.path.join(path, "config.json")):
        return path
    steps = [
        (int(name.rsplit("-", 1)[1]), name)
        for name in os.listdir(path)
        if name.startswith("checkpoint-")
        and name.rsplit("-", 1)[1].isdigit()
        and os.path.exists(os.path.join(path, name, "config.json"))
    ]
    return os.path.join(path, max(steps)[1]) if steps else path


def build_model(
    name_or_path: str,
    *,
    dtype: torch.dtype | None = None,
    seed: int = 0,
    device: torch.device | str | None = None,
) -> PreTrainedModel:
    """A checkpoint directory (loaded offline) or a named shape (random init from `seed`, created
    directly on `device`, which is much faster than initialising 0.6B weights on a CPU) in `dtype`."""
    name_or_path = resolve_checkpoint(name_or_path)
    if os.path.isdir(name_or_path):
        model = AutoModelForCausalLM.from_pretrained(
            name_or_path, local_files_only=True, dtype=dtype or torch.float32, attn_implementation="sdpa"
        )
        model.config.use_cache = False
        return model
    if name_or_path not in SHAPES:
        raise ValueError(
            f"{name_or_path!r} is neither a checkpoint directory nor one of {sorted(SHAPES)}; "
            "pass a local directory with config.json and weights (nothing is downloaded)"
        )
    config = qwen3_config(name_or_path)
    config._attn_implementation = "sdpa"
    with torch.random.fork_rng(devices=[]), torch.device(device or "cpu"):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    return model.to(dtype) if dtype is not None else model


def parameter_counts(model: PreTrainedModel) -> dict[str, int]:
    total = sum(p.numel() for p in model.parameters())
    embedding = model.get_input_embeddings().weight.numel()
    trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding, "trained": trained}


def model_flops_per_token(config: Qwen3Config, seq_len: int) -> float:
    """Training FLOPs per token (forward + backward) by the PaLM formula (Chowdhery et al. 2022,
    appendix B), as torchtitan computes MFU: 6 * N + 12 * layers * heads * head_dim * seq_len.

    N = the matmul weights a token passes through: the decoder layers plus the output projection
    (vocab x hidden, counted even when tied, since it is a matmul), not the embedding lookup. The
    attention term counts full (non-causal) attention over `seq_len`, as PaLM does; causal and
    per-document masks do less work, so this overstates attention FLOPs at long context.
    """
    h, layers = config.hidden_size, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    q, kv = config.num_attention_heads * head_dim, config.num_key_value_heads * head_dim
    attention = h * q + 2 * h * kv + q * h + 2 * head_dim  # q, k, v, o projections + q/k norms
    mlp = 3 * h * config.intermediate_size
    n = layers * (attention + mlp + 2 * h) + h + config.vocab_size * h
    return 6.0 * n + 12.0 * layers * q * seq_len

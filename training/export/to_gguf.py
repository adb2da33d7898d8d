"""A transformers checkpoint written as GGUF with the `gguf` package's writer (llama.cpp's own Python
library, from PyPI): weights under llama.cpp's tensor names, the hyperparameters and the tokenizer.

Supported: `LlamaForCausalLM` (SmolLM2 and other LLaMA-shaped models) with a byte-level BPE tokenizer,
which is what the demo trains. The layout facts follow llama.cpp's `convert_hf_to_gguf.py` and the
GGUF specification (github.com/ggml-org/ggml, docs/gguf.md); the code is ours.

The exported file also carries the checkpoint's lineage (its base.json and corpus.json) under
`agentworld.*` keys, so a GGUF model still says which base and corpus it came from. After writing, the
file's tokenizer is checked against the checkpoint's: llama.cpp must split a probe text into the same
ids, or the model would be served prompts it was never trained on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import gguf
import numpy as np

EXPORT_TYPES = ("f16", "f32", "q8_0")
SUPPORTED = ("LlamaForCausalLM",)
# What llama.cpp calls SmolLM2's pre-tokenizer (digits one by one, then GPT-2's split): its
# LLAMA_VOCAB_PRE_TYPE_SMOLLM. Another tokenizer fails the probe below and needs --pre-tokenizer.
DEFAULT_PRE_TOKENIZER = "smollm"
LINEAGE_KEYS = {"base.json": "agentworld.base", "corpus.json": "agentworld.corpus"}
# Digits, spaces, unicode, code, markup and the chat markers: where byte-level BPE splits differ.
PROBE_TEXT = (
    "total 12345 files, 3.14 héllo wörld 🚀  \n\n  def f(x):\n\treturn x**2  # <b>ok</b>\n"
    "<|im_start|>user\n[bid=42] $ ls -la\r\n  ~/src$ échec «ça» 日本語<|im_end|>\n"
)


class ExportError(ValueError):
    """The checkpoint cannot be exported as asked; the message says why and what to do."""


def export_gguf(
    checkpoint: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    out_type: str = "f16",
    pre_tokenizer: str = DEFAULT_PRE_TOKENIZER,
) -> Path:
    """Write the checkpoint (a directory, or a training run: its latest checkpoint) to `out`.

    The file appears under its final name only once complete (written beside it, then renamed)."""
    from training.models import resolve_checkpoint

    if out_type not in EXPORT_TYPES:
        raise ExportError(f"unknown output type {out_type!r}: use one of {', '.join(EXPORT_TYPES)}")
    target = Path(out)
    if target.suffix != ".gguf":
        raise ExportError(f"the output {target} must end in .gguf")
    source = Path(resolve_checkpoint(os.fspath(checkpoint)))
    config = _read_config(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    writer = gguf.GGUFWriter(partial, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    try:
        _add_hparams(writer, config, source, out_type)
        _add_tokenizer(writer, source, config["vocab_size"], pre_tokenizer)
        _add_lineage(writer, source)
        _add_tensors(writer, source, config, out_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        check_tokenizer(partial, source, pre_tokenizer)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _read_config(source: Path) -> dict:
    path = source / "config.json"
    if not path.is_file():
        raise ExportError(
            f"{source} is not a checkpoint directory (no config.json): give a directory written by "
            "training.sft / training.cpt (or its run directory), or a Hugging Face model folder"
        )
    config = json.loads(path.read_text())
    architectures = config.get("architectures") or []
    if not set(architectures) & set(SUPPORTED):
        raise ExportError(
            f"{source} is a {', '.join(architectures) or 'model of unknown architecture'}; the GGUF export "
            f"supports {', '.join(SUPPORTED)} (e.g. a model fine-tuned from smollm2-135m-instruct)"
        )
    rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if rope.get("rope_type", "default") != "default":
        raise ExportError(f"{source} uses rope scaling {rope.get('rope_type')!r}, which this export omits")
    if config.get("attention_bias") or config.get("mlp_bias"):
        raise ExportError(f"{source} has attention or MLP biases, which this export omits")
    return config


def _add_hparams(writer: gguf.GGUFWriter, config: dict, source: Path, out_type: str) -> None:
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    rope = config.get("rope_parameters") or {}
    writer.add_name(source.name)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(config.get("num_key_value_heads") or heads)
    writer.add_rope_freq_base(float(rope.get("rope_theta", config.get("rope_theta", 10_000.0))))
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    writer.add_vocab_size(config["vocab_size"])
    writer.add_rope_dimension_count(head_dim)
    if head_dim != config["hidden_size"] // heads:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    file_types = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    }
    writer.add_file_type(file_types[out_type])
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)


def _add_tokenizer(writer: gguf.GGUFWriter, source: Path, n_vocab: int, pre_tokenizer: str) -> None:
    """llama.cpp's "gpt2" vocabulary: every id's token text and type, the merges, the special ids and
    the chat template (tokenizer.json and tokenizer_config.json read by gguf.SpecialVocab)."""
    path = source / "tokenizer.json"
    if not path.is_file():
        raise ExportError(f"{source} has no tokenizer.json: export a checkpoint saved with its tokenizer")
    spec = json.loads(path.read_text(encoding="utf-8"))
    if spec.get("model", {}).get("type") != "BPE":
        raise ExportError(f"{path} is not a BPE tokenizer; the GGUF export writes byte-level BPE only")
    tokens = {i: t for t, i in spec["model"]["vocab"].items()}
    types = dict.fromkeys(tokens, gguf.TokenType.NORMAL)
    for added in spec.get("added_tokens", []):
        tokens[added["id"]] = added["content"]
        types[added["id"]] = gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER_DEFINED
    if max(tokens) >= n_vocab:
        raise ExportError(f"{path} has token id {max(tokens)}, past the model's {n_vocab} embeddings")
    # Embedding rows beyond the tokenizer's ids (padding to a round size) still need an entry each.
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre_tokenizer)
    writer.add_token_list([tokens.get(i, f"[PAD{i}]") for i in range(n_vocab)])
    writer.add_token_types([types.get(i, gguf.TokenType.UNUSED) for i in range(n_vocab)])
    # Our chat template already writes every marker, and transformers adds no BOS to SmolLM2 prompts.
    writer.add_add_bos_token(False)
    vocab = gguf.SpecialVocab(source, load_merges=True, n_vocab=n_vocab)
    if not vocab.merges:
        raise ExportError(f"{path} has no BPE merges")
    if vocab.chat_template is None:
        raise ExportError(f"{source} has no chat template; a world model is queried with chat messages")
    vocab.add_to_gguf(writer, quiet=True)


def _add_lineage(writer: gguf.GGUFWriter, source: Path) -> None:
    for name, key in LINEAGE_KEYS.items():
        if (source / name).is_file():
            writer.add_string(key, (source / name).read_text())


def _rotary_rows(weights: np.ndarray, heads: int) -> np.ndarray:
    """Q/K rows from transformers' rotary layout (each head's first half, then its second half) to
    llama.cpp's (the two halves interleaved pair by pair), as llama.cpp's converter permutes them."""
    rows = weights.shape[0]
    return (
        weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _add_tensors(writer: gguf.GGUFWriter, source: Path, config: dict, out_type: str) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, local_files_only=True)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue  # llama.cpp reads tied output weights from token_embd when output.weight is absent
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ExportError(f"{source}: no GGUF name for tensor {hf_name}")
        data = tensor.numpy()
        if hf_name.endswith("self_attn.q_proj.weight"):
            data = _rotary_rows(data, heads)
        elif hf_name.endswith("self_attn.k_proj.weight"):
            data = _rotary_rows(data, kv_heads)
        array, qtype = _encode(data, out_type)
        writer.add_tensor(name, array, raw_dtype=qtype)


def _encode(data: np.ndarray, out_type: str) -> tuple[np.ndarray, gguf.GGMLQuantizationType | None]:
    """A tensor in the output type; norms (1-D) stay float32, as llama.cpp computes them."""
    if data.ndim == 1 or out_type == "f32":
        return data.astype(np.float32), None
    if out_type == "q8_0" and data.shape[-1] % gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q8_0][0] == 0:
        qtype = gguf.GGMLQuantizationType.Q8_0
        return gguf.quants.quantize(data, qtype), qtype
    return data.astype(np.float16), None


def check_tokenizer(path: Path, source: Path, pre_tokenizer: str) -> None:
    """llama.cpp must tokenise PROBE_TEXT into the checkpoint tokenizer's ids (special markers too)."""
    from llama_cpp import Llama
    from transformers import AutoTokenizer

    expected = AutoTokenizer.from_pretrained(source, local_files_only=True)(
        PROBE_TEXT, add_special_tokens=False
    )
    llama = Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        got = llama.tokenize(PROBE_TEXT.encode(), add_bos=False, special=True)
    finally:
        llama.close()
    if got != expected["input_ids"]:
        raise ExportError(
            f"llama.cpp splits text differently from {source}'s tokenizer with pre-tokenizer "
            f"{pre_tokenizer!r} (ids {got[:12]}... vs {expected['input_ids'][:12]}...): pass the name "
            "llama.cpp uses for this tokenizer with --pre-tokenizer (LLAMA_VOCAB_PRE_TYPE in llama-vocab.cpp)"
        )


def read_lineage(path: str | os.PathLike[str]) -> dict[str, dict]:
    """The base.json and corpus.json an exported GGUF carries (those it has), by file name."""
    reader = gguf.GGUFReader(path)
    found = {}
    for name, key in LINEAGE_KEYS.items():
        field = reader.get_field(key)
        if field is not None:
            found[name] = json.loads(field.contents())
    return found


def recorded_base(path: str) -> dict | None:
    """The base an exported GGUF model was trained from, as a model spec for `training.backends`, with
    "path" (where it was recorded): a GGUF base (a file or built-in name) on llama.cpp, like the model,
    so the two generate with the same engine; None when the file records no base.json."""
    from schemas.base_files import BUILTIN_GGUF

    recorded = read_lineage(path).get("base.json")
    if recorded is None or not isinstance(recorded.get("base"), str):
        return None
    base = recorded["base"]
    if base in BUILTIN_GGUF or base.endswith(".gguf"):
        base = f"llama.cpp:{base}"
    return {"base": base, "path": path}

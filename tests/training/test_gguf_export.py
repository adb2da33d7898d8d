"""GGUF export and the llama.cpp backend: a checkpoint (SmolLM2-135M-Instruct with perturbed MLP weights,
so that it is not the base) written by `python -m training.export gguf`, read back by llama.cpp; the
repetition guard in both backends; reply bounds from the corpus an exported model was trained on."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import gguf
import pytest
import torch

from schemas.render import CLOSE_TAG
from tests.training.test_bases import PROMPTS, SMOLLM2
from training.backends import make_backend
from training.backends.base import GenerationConfig
from training.backends.llama_cpp_local import THREADS_ENV, LlamaCppBackend
from training.backends.transformers_local import TransformersBackend
from training.bases import resolve_base, tokenizer_fingerprint
from training.export.__main__ import main as export_main
from training.export.to_gguf import read_lineage
from training.fidelity.decoding import decoding_config
from training.models import build_model
from training.tokenizer import copy_tokenizer, load_tokenizer

P95 = {"terminal": 300, "android": 1600}
LOOPING = [{"role": "user", "content": "Say 'ha' 100 times."}]


def save_checkpoint(out: Path, corpus: dict) -> Path:
    """The base with noise on its last layers' MLP outputs, saved as training.sft saves a checkpoint."""
    base = resolve_base(SMOLLM2)
    model = build_model(base).eval()
    noise = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for layer in model.model.layers[-4:]:
            weight = layer.mlp.down_proj.weight
            weight.add_(torch.randn(weight.shape, generator=noise) * weight.std() * 0.5)
    model.save_pretrained(out)
    copy_tokenizer(base, str(out))
    (out / "base.json").write_text(json.dumps({"base": SMOLLM2, "resolved": base}))
    (out / "corpus.json").write_text(json.dumps(corpus))
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus folder with just the manifest keys the export and the reply bounds read."""
    root = tmp_path_factory.mktemp("corpus")
    (root / "manifest.json").write_text(json.dumps({"config": {}, "target_tokens_p95": P95}))
    return root


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Path:
    fingerprint = tokenizer_fingerprint(resolve_base(SMOLLM2))
    return save_checkpoint(
        tmp_path_factory.mktemp("sft") / "checkpoint-000020", {"corpus": str(corpus), **fingerprint}
    )


@pytest.fixture(scope="module")
def exported(checkpoint: Path) -> Path:
    out = checkpoint.parent / "model.gguf"
    # The run directory stands for its latest checkpoint, as everywhere else.
    assert export_main(["gguf", str(checkpoint.parent), str(out)]) == 0
    return out


def next_tokens_agree(gguf_file: Path, checkpoint: Path) -> tuple[int, int]:
    """(prompts where llama.cpp on the GGUF and transformers on the checkpoint pick the same next
    token, prompts where the checkpoint picks another next token than its base)."""
    from llama_cpp import Llama

    tokenizer = load_tokenizer(str(checkpoint))
    model, base = build_model(str(checkpoint)).eval(), build_model(resolve_base(SMOLLM2)).eval()
    llama = Llama(model_path=str(gguf_file), n_ctx=256, logits_all=True, verbose=False)
    agree = changed = 0
    try:
        for prompt in PROMPTS:
            ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            llama.reset()
            llama.eval(ids)
            with torch.no_grad():
                ours = int(model(torch.tensor([ids])).logits[0, -1].argmax())
                base_token = int(base(torch.tensor([ids])).logits[0, -1].argmax())
            agree += int(llama.scores[len(ids) - 1].argmax()) == ours
            changed += base_token != ours
    finally:
        llama.close()
    return agree, changed


def test_the_exported_gguf_predicts_the_checkpoints_next_token(exported: Path, checkpoint: Path) -> None:
    agree, changed = next_tokens_agree(exported, checkpoint)
    assert agree >= 9, f"llama.cpp on the export matched the checkpoint's next token on {agree} of 10 prompts"
    assert changed >= 1, "the test checkpoint must differ from its base, or the export could be the base's"
    reader = gguf.GGUFReader(exported)
    assert reader.get_field("general.architecture").contents() == "llama"
    assert reader.get_field("tokenizer.ggml.pre").contents() == "smollm"
    assert "<|im_start|>" in reader.get_field("tokenizer.chat_template").contents()
    assert {t.tensor_type for t in reader.tensors} == {
        gguf.GGMLQuantizationType.F16,
        gguf.GGMLQuantizationType.F32,
    }
    assert read_lineage(exported)["base.json"]["base"] == SMOLLM2


def test_a_q8_0_export_is_smaller_and_agrees_as_well(exported: Path, checkpoint: Path) -> None:
    out = exported.with_name("model-q8.gguf")
    assert export_main(["gguf", str(checkpoint), str(out), "--type", "q8_0"]) == 0
    assert out.stat().st_size < 0.6 * exported.stat().st_size
    agree, _ = next_tokens_agree(out, checkpoint)
    assert agree >= 9, f"the q8_0 export matched the checkpoint's next token on {agree} of 10 prompts"


def test_export_errors_say_what_to_give(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert export_main(["gguf", str(tmp_path), str(tmp_path / "m.gguf")]) == 2
    assert "no config.json" in capsys.readouterr().err
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    assert export_main(["gguf", str(tmp_path), str(tmp_path / "m.gguf")]) == 2
    assert "supports LlamaForCausalLM" in capsys.readouterr().err
    assert export_main(["gguf", str(tmp_path), str(tmp_path / "m.bin")]) == 2
    assert "must end in .gguf" in capsys.readouterr().err
    assert not list(tmp_path.glob("*gguf*")), "a failed export leaves no file behind"


@pytest.fixture(scope="module")
def llama_backend(exported: Path) -> LlamaCppBackend:
    # One thread: a test shares its cores, where llama.cpp's threads would wait on each other.
    backend = make_backend(str(exported), n_threads=1)
    assert isinstance(backend, LlamaCppBackend)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def torch_backend(checkpoint: Path) -> TransformersBackend:
    backend = make_backend(str(checkpoint))
    assert isinstance(backend, TransformersBackend)
    yield backend
    backend.close()


def test_llama_cpp_replies_as_transformers_does(
    llama_backend: LlamaCppBackend, torch_backend: TransformersBackend
) -> None:
    config = GenerationConfig(max_new_tokens=24)
    chats = [
        [
            {"role": "system", "content": "You simulate a Linux terminal."},
            {"role": "user", "content": "ls -la"},
        ],
        [{"role": "user", "content": "What is the capital of France?"}],
    ]
    for chat in chats:
        ours, theirs = llama_backend.complete(chat, config), torch_backend.complete(chat, config)
        assert ours.strip(), "llama.cpp gave an empty reply"
        # Same ids in, the same greedy tokens out: f16 weights move logits by ~0.03, below these margins.
        assert ours == theirs


def test_the_repetition_guard_stops_a_looping_reply_in_both_backends(
    llama_backend: LlamaCppBackend, torch_backend: TransformersBackend
) -> None:
    # The guard needs a loop over 128+ tokens; here it stopped both backends at 146 (measured), so a
    # bound of 192 leaves room between where it fires and where an unguarded reply ends.
    bound = 192
    free = GenerationConfig(max_new_tokens=bound)
    guarded = GenerationConfig(max_new_tokens=bound, repetition_guard=True)
    for backend in (llama_backend, torch_backend):
        looping, stopped = backend.complete(LOOPING, free), backend.complete(LOOPING, guarded)
        tokens = len(backend.tokenizer(looping, add_special_tokens=False)["input_ids"])
        kept = len(backend.tokenizer(stopped, add_special_tokens=False)["input_ids"])
        assert tokens >= bound - 4, (
            f"{backend.name}: the test prompt no longer loops to the bound ({tokens} tokens)"
        )
        assert kept < bound - 16 and looping.startswith(stopped), f"{backend.name}: {kept} tokens kept"


def test_a_reply_ends_at_its_first_stop_string_kept_in_both_backends(
    llama_backend: LlamaCppBackend, torch_backend: TransformersBackend
) -> None:
    free = GenerationConfig(max_new_tokens=40)
    for backend in (llama_backend, torch_backend):
        reply = backend.complete(LOOPING, free)
        stop = reply[10:14]
        assert len(stop) == 4, f"{backend.name}: the test prompt replied with too little: {reply!r}"
        kept = backend.complete(LOOPING, dataclasses.replace(free, stop=(stop,), include_stop=True))
        assert kept == reply[: reply.find(stop) + len(stop)], backend.name


def test_make_backend_picks_the_engine(exported: Path) -> None:
    prefixed = make_backend(f"llama.cpp:{exported}", n_threads=1)
    assert isinstance(prefixed, LlamaCppBackend)
    prefixed.close()
    forced = make_backend(f"transformers:{SMOLLM2}")
    assert isinstance(forced, TransformersBackend) and forced.describe()["architecture"] == "LlamaForCausalLM"
    forced.close()
    with pytest.raises(ValueError, match="not a GGUF file"):
        make_backend("llama.cpp:/some/checkpoint")


def test_reply_bounds_come_from_the_corpus_the_gguf_was_trained_on(exported: Path, tmp_path: Path) -> None:
    args = argparse.Namespace(
        model=str(exported), held_out=None, max_new_tokens=128, reply_bounds="corpus", repetition_guard="on"
    )
    config = decoding_config(args)
    assert config.repetition_guard
    assert config.for_domain("terminal").max_new_tokens == 375  # 1.25 x 300
    assert config.for_domain("android").max_new_tokens == 2000
    assert config.for_domain("web").max_new_tokens == 128  # not in the corpus: the global bound
    held_out = tmp_path / "held-out"
    held_out.mkdir()
    (held_out / "manifest.json").write_text(json.dumps({"target_tokens_p95": {"terminal": 80}}))
    config = decoding_config(argparse.Namespace(**{**vars(args), "held_out": str(held_out)}))
    assert (
        config.for_domain("terminal").max_new_tokens == 100
        and config.for_domain("android").max_new_tokens == 128
    )
    fixed = decoding_config(
        argparse.Namespace(**{**vars(args), "reply_bounds": "fixed", "repetition_guard": "off"})
    )
    assert fixed.for_domain("android").max_new_tokens == 128 and not fixed.repetition_guard
    # Edit-script lengths bound delta answers only: the base of a delta model answers in full.
    manifest = {"target_tokens_p95": {"terminal": 80}, "config": {"target": "delta"}}
    (held_out / "manifest.json").write_text(json.dumps(manifest))
    config = decoding_config(argparse.Namespace(**{**vars(args), "held_out": str(held_out)}))
    assert config.for_domain("terminal", "delta").max_new_tokens == 100
    assert config.for_domain("terminal", "full").max_new_tokens == 128
    # Every reply ends at its first closing tag, which it keeps.
    assert config.stop == (CLOSE_TAG,) and config.include_stop and fixed.include_stop


def test_a_gguf_refuses_a_tokenizer_other_than_its_corpus(tmp_path: Path, corpus: Path) -> None:
    wrong = {"corpus": str(corpus), "tokenizer_sha256": "0" * 64, "chat_template_sha256": "1" * 64}
    checkpoint = save_checkpoint(tmp_path / "other", wrong)
    assert export_main(["gguf", str(checkpoint), str(tmp_path / "other.gguf")]) == 0
    with pytest.raises(ValueError, match="rebuild the corpus"):
        LlamaCppBackend(tmp_path / "other.gguf")


def test_llama_cpp_log_likelihood_equals_transformers(
    llama_backend: LlamaCppBackend, torch_backend: TransformersBackend
) -> None:
    prompts = [
        [{"role": "system", "content": "You simulate a Linux terminal."}, {"role": "user", "content": "ls"}],
        [{"role": "user", "content": "What is the capital of France?"}],
    ]
    # The second answer spans more than one llama.cpp batch (512 positions) with the prompt.
    answers = ["<observation>\nnotes.txt  src\n$ </observation>", "The capital of France is Paris. " * 80]
    # The next turn of the first, and the first with another answer: both share its context, which
    # the scoring reuses from the KV cache
    prompts += [
        [
            *prompts[0],
            {"role": "assistant", "content": answers[0]},
            {"role": "user", "content": "cat notes.txt"},
        ],
        prompts[0],
    ]
    answers += [
        "<observation>\nbuy milk\n$ </observation>",
        "<observation>\nls: command not found\n$ </observation>",
    ]
    ours, theirs = (
        llama_backend.log_likelihood(prompts, answers),
        torch_backend.log_likelihood(prompts, answers),
    )
    for (nll, count), (expected, expected_count) in zip(ours, theirs, strict=True):
        assert count == expected_count > 0
        # f16 weights and llama.cpp's kernels against float32 PyTorch: the same NLL within 1%.
        assert abs(nll - expected) <= 0.01 * expected + 0.05, (nll, expected)
    # Generation after scoring and scoring after generation reuse the KV cache each other left.
    config = GenerationConfig(max_new_tokens=8)
    for chat in (prompts[1], prompts[2], prompts[0]):
        reply = llama_backend.complete(chat, config)
        assert reply == torch_backend.complete(chat, config), "scoring left state"
        again = llama_backend.log_likelihood(prompts, answers)
        assert [count for _, count in again] == [count for _, count in ours]
        assert all(abs(a - b) <= 1e-3 * b for (a, _), (b, _) in zip(again, ours, strict=True)), (again, ours)


def test_fidelity_scores_a_gguf_model_against_its_recorded_base_on_llama_cpp(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.training.conftest import TERMINAL_RUN
    from training.fidelity.__main__ import main as fidelity_main

    # One thread: a test shares its cores, where llama.cpp's threads would wait on each other.
    monkeypatch.setenv(THREADS_ENV, "1")
    out = tmp_path / "fidelity"
    argv = ["--real", str(TERMINAL_RUN), "--model", str(exported), "--out", str(out), "--replays", "0"]
    argv += ["--limit-trajectories", "1", "--max-turns", "1", "--max-new-tokens", "24", "--no-closed-loop"]
    argv += ["--context-chars", "2000", "--reply-bounds", "fixed", "--no-likelihood", "--no-progress"]
    assert fidelity_main(argv) == 0
    meta = json.loads((out / "report.json").read_text())["meta"]
    assert meta["model"]["backend"] == "llama.cpp"
    # The base.json the export carries names the built-in base: it generates on llama.cpp as well.
    assert meta["base"]["spec"] == f"llama.cpp:{SMOLLM2}" and meta["base"]["backend"] == "llama.cpp"
    assert meta["generation"]["repetition_guard"] is True and meta["generation"]["max_new_tokens"] == 24
    assert meta["request_errors"] == 0

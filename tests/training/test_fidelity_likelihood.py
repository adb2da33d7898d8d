"""Likelihood scoring: the backend's numbers against a plain transformers computation on REAL recorded
turns and the real SmolLM2-135M base, batching against one by one, the fidelity CLI end to end (a REAL
llama.cpp server as a system without weights), and the report's pooled bits per byte."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from schemas.render import chat_messages, target_text, turn_target
from tests.llm_server import LLMServer
from tests.training.conftest import TERMINAL_RUN
from training.backends.openai_http import OpenAIBackend
from training.backends.transformers_local import TransformersBackend
from training.fidelity.__main__ import main as fidelity_main
from training.fidelity.__main__ import with_steps
from training.fidelity.cache import ReplyCache
from training.fidelity.likelihood import likelihood_turns, score_system
from training.fidelity.teacher_forced import fits_chars
from training.models import build_model
from training.tokenizer import copy_tokenizer, tokenizer_dir

CONTEXT_CHARS = 3000


@pytest.fixture(scope="module")
def trajectories() -> list:
    return list(with_steps(str(TERMINAL_RUN)))


def plain_nll(backend: TransformersBackend, context: str, answer: str) -> tuple[float, int]:
    """The answer's NLL after `context`, from the model's full logits, no batching, no chunking."""
    tok = backend.tokenizer
    context_ids = tok(context, add_special_tokens=False)["input_ids"]
    answer_ids = tok(answer, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([context_ids + answer_ids])
    with torch.no_grad():
        logits = backend.model(input_ids=ids).logits[0].float()
    logprobs = torch.log_softmax(logits[len(context_ids) - 1 : -1], dim=-1)
    picked = logprobs.gather(1, torch.tensor(answer_ids)[:, None])
    return -float(picked.sum()), len(answer_ids)


def test_smollm2_likelihood_equals_a_plain_transformers_computation(trajectories: list) -> None:
    backend = TransformersBackend("smollm2-135m-instruct")
    t = trajectories[0]
    messages = [chat_messages(t, k, fits=fits_chars(CONTEXT_CHARS)) for k in (1, 2)]
    answers = [target_text(t.steps[k - 1].observation) for k in (1, 2)]
    scores = backend.log_likelihood(messages, answers)
    for m, answer, (nll, tokens) in zip(messages, answers, scores, strict=True):
        # SmolLM2's template puts nothing before an assistant answer: the context is the generation prompt
        context = backend.tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
        expected_nll, expected_tokens = plain_nll(backend, context, answer)
        assert tokens == expected_tokens > 10
        assert nll == pytest.approx(expected_nll, rel=1e-4)
    # a pretrained model finds real terminal screens far likelier than chance over its 49k vocabulary
    assert all(nll / tokens < math.log(49_152) / 3 for nll, tokens in scores)


def test_qwen3_likelihood_follows_the_think_block_training_saw(trajectories: list) -> None:
    backend = TransformersBackend("qwen3-tiny")
    t = trajectories[0]
    m, answer = chat_messages(t, 1, fits=fits_chars(CONTEXT_CHARS)), target_text(t.steps[0].observation)
    prompt = backend.tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
    # Qwen3's template writes an empty think block before a final assistant answer: the SFT loss
    # started after it, so the answer is scored after it too
    (expected, tokens) = plain_nll(backend, prompt + "<think>\n\n</think>\n\n", answer)
    (without, _) = plain_nll(backend, prompt, answer)
    nll, scored_tokens = backend.log_likelihood([m], [answer])[0]
    assert scored_tokens == tokens
    # random weights barely care what came before: the context shows in the second decimal only
    assert nll == pytest.approx(expected, abs=0.01) and abs(nll - without) > 0.05


def test_turns_of_a_trajectory_compute_only_what_they_do_not_share(trajectories: list) -> None:
    backend = TransformersBackend("qwen3-tiny")
    turns = likelihood_turns(trajectories[:2], CONTEXT_CHARS)
    messages, answers = [t.messages for t in turns], [t.answer("full") for t in turns]
    rows = [backend._scored_ids(m, a) for m, a in zip(messages, answers, strict=True)]
    computed: list[int] = []
    hook = backend.model.get_decoder().register_forward_pre_hook(
        lambda _, args, kwargs: computed.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        shared = backend.log_likelihood(messages, answers)
    finally:
        hook.remove()
    # every pair alone, without a cache: the path GPUs take (one padded batch per pair)
    alone = [backend._answer_nll([row])[0] for row in rows]
    assert [tokens for _, tokens in shared] == [tokens for _, tokens in alone]
    for (nll, _), (expected, _) in zip(shared, alone, strict=True):
        assert nll == pytest.approx(expected, rel=1e-4)
    # one forward pass per pair, and together well under the tokens the pairs hold
    assert len(computed) == len(rows)
    assert sum(computed) < 0.7 * sum(len(ids) for ids, _ in rows)


def test_batches_give_the_numbers_of_one_by_one(trajectories: list) -> None:
    backend = TransformersBackend("qwen3-tiny")
    turns = likelihood_turns(trajectories[:2], CONTEXT_CHARS)
    messages, answers = [t.messages for t in turns], [t.answer("full") for t in turns]
    alone = [backend.log_likelihood([m], [a])[0] for m, a in zip(messages, answers, strict=True)]
    # a small budget cuts several padded batches of different widths; a large one takes them all at once
    for budget in (3000, 100_000):
        batched = backend.log_likelihood(messages, answers, max_batch_tokens=budget)
        assert [tokens for _, tokens in batched] == [tokens for _, tokens in alone]
        for (nll, _), (expected, _) in zip(batched, alone, strict=True):
            assert nll == pytest.approx(expected, rel=1e-4)
    assert len({tokens for _, tokens in alone}) > 3  # the turns really differ in length


def test_a_system_without_weights_says_so_and_scores_are_cached(tmp_path: Path, trajectories: list) -> None:
    turns = likelihood_turns(trajectories[:1], CONTEXT_CHARS)
    cache = ReplyCache(tmp_path / "likelihood.jsonl")
    # never contacted: an endpoint serves replies, not log-likelihoods of given text
    found = score_system(OpenAIBackend("http://127.0.0.1:9/v1", model="sft"), turns, cache)
    assert found == "no likelihood: no weights: the openai backend only replies"
    backend = TransformersBackend("qwen3-tiny")
    first = score_system(backend, turns, cache)
    assert isinstance(first, list) and len(first) == len(turns)
    assert [r["bytes"] for r in first] == [len(s.observation.text.encode()) for s in trajectories[0].steps]
    lines = (tmp_path / "likelihood.jsonl").read_text().count("\n")
    assert score_system(backend, turns, cache) == first  # a rerun reads them back
    assert (tmp_path / "likelihood.jsonl").read_text().count("\n") == lines == len(turns)


def test_a_delta_model_is_scored_on_its_edit_scripts_per_byte_of_the_whole_observation(
    tmp_path: Path, trajectories: list
) -> None:
    t = trajectories[0]
    turns = likelihood_turns([t], CONTEXT_CHARS)
    assert [turn.answer("delta") for turn in turns] == [
        turn_target(t, k, "delta") for k in range(1, len(turns) + 1)
    ]
    # a prompt that lost the previous observation gets the whole observation, as in the corpus
    (short,) = [turn for turn in likelihood_turns([t], 10) if turn.turn_idx == 3]
    assert len(short.messages) == 2 and short.answer("delta") == target_text(t.steps[2].observation)
    backend = TransformersBackend("qwen3-tiny")
    cache = ReplyCache(tmp_path / "likelihood.jsonl")
    full, delta = (score_system(backend, turns, cache, form=form) for form in ("full", "delta"))
    assert isinstance(full, list) and isinstance(delta, list)
    # terminal screens change little a step: the scripts are shorter, the bytes scored per the same
    assert sum(r["tokens"] for r in delta) < sum(r["tokens"] for r in full)
    assert [r["bytes"] for r in delta] == [r["bytes"] for r in full]


def held_out_corpus(root: Path, ids: list[str]) -> Path:
    bench = root / "agentworldbench"
    bench.mkdir(parents=True)
    (bench / "terminal_test.jsonl").write_text("".join(json.dumps({"id": f"{i}:1"}) + "\n" for i in ids))
    return root


def other_tiny_checkpoint(path: Path) -> Path:
    """qwen3-tiny from another seed, saved as a checkpoint directory: a second set of weights."""
    build_model("qwen3-tiny", seed=1).save_pretrained(path)
    copy_tokenizer(tokenizer_dir(), str(path))
    return path


@pytest.mark.llm
def test_cli_writes_the_likelihood_of_every_held_out_turn(
    tmp_path: Path, trajectories: list, llm_server: LLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    held = [t.trajectory_id for t in trajectories[:3]]
    corpus = held_out_corpus(tmp_path / "corpus", held)
    base = other_tiny_checkpoint(tmp_path / "base")
    argv = ["--real", str(TERMINAL_RUN), "--model", "qwen3-tiny"]
    argv += ["--base", str(base), "--compare", f"served={llm_server.base_url}", "--held-out", str(corpus)]
    argv += ["--limit-trajectories", "2", "--max-turns", "1", "--max-new-tokens", "8", "--replays", "0"]
    argv += ["--no-closed-loop", "--no-progress", "--context-chars", str(CONTEXT_CHARS)]

    def run(out: Path, *extra: str) -> tuple[dict, str]:
        # In this process: a fresh interpreter for each of the three runs would import torch again.
        assert fidelity_main([*argv, "--out", str(out), *extra]) == 0, capsys.readouterr().err[-3000:]
        return json.loads((out / "report.json").read_text()), capsys.readouterr().out

    report, stdout = run(tmp_path / "rep")
    section = report["likelihood"]
    # generation covered 2 trajectories x 1 turn; likelihood every turn of the 3 held-out trajectories
    assert report["meta"]["turns"] == 2
    assert section["turns"] == sum(len(t.steps) for t in trajectories[:3]) and section["trajectories"] == 3
    assert section["systems"] == ["model", "base"] and section["reference"] == "base"
    assert section["skipped"] == {"served": "no likelihood: no weights: the openai backend only replies"}
    terminal = section["domains"]["terminal"]
    model, base_stats = terminal["systems"]["model"], terminal["systems"]["base"]
    assert model["turns"] == base_stats["turns"] == section["turns"]
    # random weights over a 151k vocabulary: near ln(151k) nats a token, several bits a byte
    assert 0.8 * math.log(151_669) < model["nll_per_token"] < 1.2 * math.log(151_669)
    (diff,) = terminal["differences"]
    assert (diff["a"], diff["b"], diff["trajectories"]) == ("model", "base", 3)
    # weighted by bytes, the paired difference is exactly the difference of the pooled bits per byte
    assert diff["difference"] == pytest.approx(model["bits_per_byte"] - base_stats["bits_per_byte"])
    assert diff["ci_low"] <= diff["difference"] <= diff["ci_high"]
    assert "model - base bits/byte (95% CI)" in stdout and "served: no likelihood: no weights" in stdout
    md, html = (tmp_path / "rep" / "report.md").read_text(), (tmp_path / "rep" / "report.html").read_text()
    assert "## Likelihood" in md and "model - base bits/byte (95% CI)" in md
    assert '<table class="likelihood">' in html and "served: no likelihood: no weights" in html

    # a rerun computes nothing again; --no-likelihood leaves the section out
    cached = (tmp_path / "rep" / "likelihood.jsonl").read_text()
    again, _ = run(tmp_path / "rep")
    assert (tmp_path / "rep" / "likelihood.jsonl").read_text() == cached
    assert again["likelihood"]["domains"] == section["domains"]
    skipped, _ = run(tmp_path / "rep-none", "--no-likelihood")
    assert "likelihood" not in skipped and not (tmp_path / "rep-none" / "likelihood.jsonl").exists()


def test_a_likelihood_budget_scores_every_turn_of_the_first_trajectories(
    tmp_path: Path, trajectories: list
) -> None:
    from training.fidelity.__main__ import likelihood_pass, parse_args

    argv = ["--real", str(TERMINAL_RUN), "--model", "qwen3-tiny", "--out", str(tmp_path)]
    argv += ["--max-turns", "0", "--likelihood-trajectories", "2"]
    scored = likelihood_pass(parse_args(argv), trajectories, None)
    assert scored is not None
    # every turn of the first two terminal trajectories, and the budget said in the report
    assert (
        len(scored.turns)
        == sum(len(t.steps) for t in trajectories[:2])
        < sum(len(t.steps) for t in trajectories)
    )
    assert {t.trajectory.trajectory_id for t in scored.turns} == {t.trajectory_id for t in trajectories[:2]}
    assert "first 2 trajectories of each domain" in scored.section()["notes"][0]
    scored.close()


def test_the_likelihood_pass_alone_writes_no_empty_generation_tables(tmp_path: Path) -> None:
    from training.fidelity.__main__ import main
    from training.fidelity.report import NO_GENERATION

    argv = ["--real", str(TERMINAL_RUN), "--model", "qwen3-tiny", "--base", "none", "--out", str(tmp_path)]
    argv += ["--max-turns", "0", "--limit-trajectories", "1", "--replays", "0", "--no-progress"]
    assert main(argv) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["meta"]["turns"] == 0 and report["likelihood"]["turns"] > 0
    markdown = (tmp_path / "report.md").read_text()
    assert NO_GENERATION in markdown and "## Likelihood" in markdown
    assert "## overall" not in markdown and "| domain | real vs real" not in markdown
    assert NO_GENERATION in (tmp_path / "report.html").read_text()

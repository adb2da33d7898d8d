"""GSPO on CPU through TRL: a few steps of SmolLM2-135M on an RL corpus the real pipeline built, rewarded
by the rule verifiers and a real judge (llama.cpp's server); the components are logged per step, the
run resumes, and its checkpoint serves the simulated sandbox."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from sandboxes.checks import check_sandbox
from sandboxes.terminal import command_action
from schemas.records import Task
from tests.llm_server import LLMServer
from tests.training.conftest import build_corpus
from training.backends import make_backend
from training.backends.base import GenerationConfig
from training.bases import resolve_base
from training.rl.__main__ import main as rl_main
from training.rl.samples import one_turn_per_trajectory, read_records
from training.rl.trainer import RLConfig, _dataset
from training.simulator import SimulatedSandbox
from training.tokenizer import tokenizer_dir

BASE = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def rl_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rl") / "corpus"
    return build_corpus(
        out, "--tokenizer", BASE, "--seq-len", "2048", "--emit", "rl", "--split-ratios", "1,0,0"
    )


def test_one_turn_per_trajectory_is_a_seeded_choice(rl_corpus: Path) -> None:
    records = list(read_records(str(rl_corpus), "train"))
    trajectories = {r["trajectory_id"] for r in records}
    first = one_turn_per_trajectory(records, seed=0)
    assert len(first) == len(trajectories) < len(records)
    assert [s.sample_id for s in one_turn_per_trajectory(records, seed=0)] == [s.sample_id for s in first]
    others = [one_turn_per_trajectory(records, seed=s) for s in range(1, 6)]
    assert any([s.sample_id for s in o] != [s.sample_id for s in first] for o in others)
    short = one_turn_per_trajectory(records, fits=lambda messages: len(messages) <= 3)
    assert short and all(len(s.prompt) <= 3 for s in short)
    assert one_turn_per_trajectory(records, fits=lambda messages: False) == []


def test_the_rl_prompts_are_those_that_fit_max_prompt_tokens(rl_corpus: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir(resolve_base(BASE)), local_files_only=True)

    def prompts(limit: int) -> list:
        config = RLConfig(corpus=str(rl_corpus), base=BASE, out="", max_prompt_tokens=limit)
        return _dataset(config, tokenizer)[1]

    def length(messages: list[dict]) -> int:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    limit = 512
    every = prompts(4096)
    assert max(length(s.prompt) for s in every) > limit, "the corpus no longer has a prompt over the limit"
    fitting = prompts(limit)
    assert len(fitting) == len(every)  # each trajectory has a turn that fits: one of those is chosen
    assert all(length(s.prompt) <= limit for s in fitting), sorted(length(s.prompt) for s in fitting)
    with pytest.raises(ValueError, match="fits --max-prompt-tokens 64"):
        prompts(64)  # shorter than the system prompt


def test_a_missing_corpus_and_a_hybrid_without_judge_are_clear_errors(
    rl_corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(*args: str) -> str:
        assert rl_main([*args, "--base", BASE, "--out", str(tmp_path / "run")]) == 2
        return capsys.readouterr().err

    assert "build_corpus --emit rl" in refused("--corpus", str(tmp_path), "--reward", "rules")
    assert "--judge-url" in refused("--corpus", str(rl_corpus))
    unnamed = tmp_path / "no-manifest"
    shutil.copytree(rl_corpus, unnamed, ignore=shutil.ignore_patterns("manifest.json"))
    assert "--skip-tokenizer-check" in refused("--corpus", str(unnamed), "--reward", "rules")


@pytest.mark.llm
@pytest.mark.timeout(900)  # three short runs of a 135M model on 2 cores: about 3 minutes when quiet
def test_a_short_gspo_run_logs_its_reward_resumes_and_serves_the_simulator(
    rl_corpus: Path, tmp_path: Path, llm_server: LLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    common = [
        "--corpus",
        str(rl_corpus),
        "--base",
        BASE,
        "--out",
        str(run),
        "--judge-url",
        llm_server.base_url,
    ]
    common += ["--num-generations", "2", "--max-completion-tokens", "24", "--max-prompt-tokens", "512"]
    common += ["--train-layers", "2", "--save-steps", "1", "--lr", "1e-5", "--judge-max-chars", "1200"]
    # In this process, as the argument tests: two more interpreters would each import torch and TRL.
    assert rl_main([*common, "--max-steps", "2"]) == 0, capsys.readouterr().err[-4000:]
    capsys.readouterr()
    assert rl_main([*common, "--max-steps", "3", "--resume"]) == 0, capsys.readouterr().err[-4000:]
    assert "GSPO: 3 steps" in capsys.readouterr().out

    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged = [s for s in steps if "reward" in s]
    assert [s["step"] for s in logged] == [1, 2, 3], (
        "each step once: the resumed run drops nothing, repeats nothing"
    )
    for s in logged:
        assert {"rewards/judge/mean", "rewards/rules/mean", "guarded", "kl"} <= set(s), sorted(s)
        assert 0.0 <= s["rewards/rules/mean"] <= 1.0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_from"].endswith("checkpoint-2") and summary["steps"] == 3
    assert summary["config"]["reward"] == "hybrid" and summary["generation"] == "transformers"

    final = run / "final"
    assert json.loads((final / "base.json").read_text())["base"] == BASE
    assert (final / "corpus.json").is_file()
    backend = make_backend(str(final))  # refuses a checkpoint whose tokenizer differs from its corpus's
    sim = SimulatedSandbox(backend, generation=GenerationConfig(max_new_tokens=8))
    check_sandbox(sim, Task(id="t1"), [command_action("echo hi")])
    backend.close()

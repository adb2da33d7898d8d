"""GSPO on TRL's GRPOTrainer: a world-model checkpoint sharpened on RL prompts with the hybrid reward.

GSPO is GRPO with sequence-level importance ratios (`importance_sampling_level="sequence"`), clipped to
the narrow range its paper uses (3e-4 below, 4e-4 above): a ratio over a whole sequence moves far less
than a token's. Generation runs in vLLM when it is installed and a GPU is present (colocated with
training), in transformers otherwise. KL control against the starting checkpoint is `beta`.

Every checkpoint (TRL's `checkpoint-N` folders, and `final/`) is a Hugging Face model folder that also
holds the starting checkpoint's tokenizer files byte for byte and the lineage files (`base.json`,
`corpus.json`), so the simulator and the fidelity report load it like any SFT checkpoint.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Literal

from training.bases import check_fingerprint, corpus_fingerprint, lineage, resolve_base
from training.models import SHAPES
from training.rewards.hybrid import RewardWeights
from training.rl.rewards import HybridRewards
from training.rl.samples import one_turn_per_trajectory, read_records
from training.tokenizer import copy_tokenizer, tokenizer_dir

FINAL = "final"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
GSPO_EPSILON, GSPO_EPSILON_HIGH = 3e-4, 4e-4  # the GSPO paper's clipping range (arXiv 2507.18071)


@dataclass
class RLConfig:
    corpus: str  # corpus root written by build_corpus (uses CORPUS/rl/<split>)
    base: str  # the starting checkpoint: usually the SFT run's final checkpoint
    out: str
    split: str = "train"
    domains: tuple[str, ...] = ()  # empty: every domain
    reward: Literal["hybrid", "rules"] = "hybrid"
    judge_url: str | None = None
    judge_model: str | None = None
    judge_max_chars: int | None = None  # None: the judge's default cut of each text it is shown
    judge_weight: float = 0.9
    rules_weight: float = 0.1
    max_steps: int = 30
    prompts_per_step: int = 1
    num_generations: int = 4
    max_prompt_tokens: int = 1024
    max_completion_tokens: int = 256
    temperature: float = 1.0
    lr: float = 1e-6
    beta: float = 0.01
    train_layers: int | None = None
    save_steps: int = 10
    keep_last: int = 2
    seed: int = 0
    generation: Literal["auto", "vllm", "transformers"] = "auto"
    resume: bool = False
    skip_tokenizer_check: bool = False  # a corpus without a tokenizer fingerprint (see training.bases)

    def weights(self) -> RewardWeights:
        if self.reward == "rules":
            return RewardWeights(judge=0.0, rules=1.0)
        return RewardWeights(judge=self.judge_weight, rules=self.rules_weight)


def use_vllm(choice: str) -> bool:
    """vLLM generation where it can run (installed, and a CUDA device present)."""
    import torch

    available = importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()
    if choice == "vllm" and not available:
        raise RuntimeError(
            "--generation vllm needs the vllm package and a CUDA GPU; use --generation transformers"
        )
    return available if choice == "auto" else choice == "vllm"


def _dataset(cfg: RLConfig, tokenizer) -> tuple:
    from datasets import Dataset

    def fits(messages: list[dict]) -> bool:
        # return_dict: transformers 5 returns a BatchEncoding by default, whose len() counts its keys.
        ids = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        return len(ids) <= cfg.max_prompt_tokens

    samples = one_turn_per_trajectory(read_records(cfg.corpus, cfg.split), cfg.seed, fits, cfg.domains)
    if not samples:
        raise ValueError(
            f"no RL prompt of split {cfg.split!r} in {cfg.corpus} fits "
            f"--max-prompt-tokens {cfg.max_prompt_tokens}"
            + (f" in domains {', '.join(cfg.domains)}" if cfg.domains else "")
            + ": raise --max-prompt-tokens or build the corpus with a smaller --seq-len"
        )
    return Dataset.from_list([s.row() for s in samples]), samples


def _callback(cfg: RLConfig, tokenizer_folder: str, files: dict[str, dict]):
    """A TrainerCallback (made here: transformers is imported only when training) that makes every
    saved checkpoint loadable by the simulator, and writes each logged step to metrics.jsonl."""
    from transformers import TrainerCallback

    class Lineage(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            finish_checkpoint(folder, tokenizer_folder, files)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                with open(os.path.join(cfg.out, METRICS), "a") as f:
                    f.write(json.dumps({"step": state.global_step, **logs}) + "\n")

    return Lineage()


def finish_checkpoint(folder: str, tokenizer_folder: str, files: dict[str, dict]) -> None:
    """The starting checkpoint's tokenizer (save_pretrained re-serialises it) and the lineage files."""
    if not os.path.isdir(folder):
        return
    copy_tokenizer(tokenizer_folder, folder)
    for name, content in files.items():
        with open(os.path.join(folder, name), "w") as f:
            json.dump(content, f, indent=2)


def train(cfg: RLConfig) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig, GRPOTrainer

    from training.backends import make_backend
    from training.loop import freeze_below, keep_metrics_until

    resolved = resolve_base(cfg.base)
    if resolved in SHAPES:
        raise ValueError(
            f"GSPO starts from a trained checkpoint, not the untrained shape {resolved!r}: train it with "
            "training.sft first, or save the shape with save_pretrained and pass that directory"
        )
    tok_folder = tokenizer_dir(resolved)
    tokenizer = AutoTokenizer.from_pretrained(tok_folder, local_files_only=True)
    dataset, samples = _dataset(cfg, tokenizer)  # first: a missing corpus says how to build one
    fingerprint = corpus_fingerprint(cfg.corpus)
    check_fingerprint(fingerprint, tok_folder, cfg.corpus, cfg.base, skip=cfg.skip_tokenizer_check)
    os.makedirs(cfg.out, exist_ok=True)
    resume_from = get_last_checkpoint(cfg.out) if cfg.resume and os.path.isdir(cfg.out) else None
    metrics_path = os.path.join(cfg.out, METRICS)
    if resume_from:
        keep_metrics_until(metrics_path, int(resume_from.rsplit("-", 1)[1]))
    elif os.path.exists(metrics_path):
        os.remove(metrics_path)

    torch.manual_seed(cfg.seed)
    model = AutoModelForCausalLM.from_pretrained(resolved, dtype=torch.float32)
    if cfg.train_layers:
        freeze_below(model, cfg.train_layers)
    judge_backend = None
    if cfg.reward == "hybrid":
        if not cfg.judge_url:
            raise ValueError(
                "--reward hybrid needs --judge-url (an OpenAI-compatible judge); or use --reward rules"
            )
        judge_backend = make_backend(cfg.judge_url, model=cfg.judge_model)
    rewards = HybridRewards(
        cfg.weights(),
        judge_backend,
        concurrency=cfg.num_generations * cfg.prompts_per_step,
        judge_max_chars=cfg.judge_max_chars,
    )

    vllm = use_vllm(cfg.generation)
    args = GRPOConfig(
        output_dir=cfg.out,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.prompts_per_step * cfg.num_generations,
        gradient_accumulation_steps=1,
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_tokens,
        temperature=cfg.temperature,
        generation_kwargs={"use_cache": True},  # a checkpoint saved for training may have it off
        learning_rate=cfg.lr,
        lr_scheduler_type="constant",
        beta=cfg.beta,
        importance_sampling_level="sequence",
        loss_type="grpo",
        epsilon=GSPO_EPSILON,
        epsilon_high=GSPO_EPSILON_HIGH,
        reward_weights=rewards.reward_weights(),
        use_vllm=vllm,
        vllm_mode="colocate",
        gradient_checkpointing=False,  # TRL's default trades speed for memory a small model has to spare
        logging_steps=1,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.keep_last or None,
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=torch.cuda.is_available(),
        use_cpu=not torch.cuda.is_available(),
        report_to=[],
        remove_unused_columns=False,
        shuffle_dataset=True,
    )
    files = lineage(cfg.base, resolved, fingerprint, cfg.corpus)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=rewards.reward_functions(),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[_callback(cfg, tok_folder, files)],
    )
    started = time.monotonic()
    try:
        trainer.train(resume_from_checkpoint=resume_from)
    finally:
        rewards.close()
        if judge_backend is not None:
            judge_backend.close()
    final = os.path.join(cfg.out, FINAL)
    trainer.save_model(final)
    finish_checkpoint(final, tok_folder, files)
    summary = _summary(cfg, metrics_path, final, resume_from, len(samples), time.monotonic() - started, vllm)
    with open(os.path.join(cfg.out, SUMMARY), "w") as f:
        json.dump(summary, f, indent=2)
    return summary


def _summary(cfg, metrics_path, final, resume_from, prompts, elapsed, vllm) -> dict:
    steps = []
    if os.path.exists(metrics_path):
        with open(metrics_path) as f:
            steps = [json.loads(line) for line in f if line.strip()]
    steps = [s for s in steps if "reward" in s]

    def mean_of(key: str, part: list[dict]) -> float | None:
        values = [s[key] for s in part if s.get(key) is not None]
        return sum(values) / len(values) if values else None

    head, tail = steps[: max(1, len(steps) // 3)], steps[-max(1, len(steps) // 3) :]
    components = sorted({k for s in steps for k in s if k.startswith("rewards/") and k.endswith("/mean")})
    return {
        "steps": steps[-1]["step"] if steps else 0,
        "prompts": prompts,
        "resumed_from": resume_from,
        "reward_first_third": mean_of("reward", head),
        "reward_last_third": mean_of("reward", tail),
        "components_last_third": {k: mean_of(k, tail) for k in components},
        "elapsed_s": elapsed,
        "generation": "vllm" if vllm else "transformers",
        "checkpoint": final,
        "config": asdict(cfg),
    }

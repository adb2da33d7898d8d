"""GRPO of the agent against the simulated terminal, on TRL's GRPOTrainer with a multi-turn `rollout_func`.

Each GRPO step takes every task `generations` times (one group per task). The rollout function plays
each as a whole episode in the simulator (play.py) with the policy being trained, and hands TRL the
episode's tokens: the prompt (system prompt and first screen), the completion (replies and the screens
between them), the sampling log-probabilities, and `env_mask`, which TRL applies as its tool mask so
only the agent's own tokens carry loss. The reward is the simulated verifier's (training.simulator:
the world model asked each check), an undecided verdict scoring 0; TRL normalises it within the group.
Every episode played is appended to OUT/rollouts.jsonl.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandboxes.agent_prompt import system_prompt
from sandboxes.base import Sandbox
from sandboxes.domains import domain_spec
from schemas.records import Task
from training.agent_rl.play import DOMAIN, Agent, Played, Sampling, play_all

ROLLOUTS = "rollouts.jsonl"
TRAIN_SEED_BASE = 1_000_000  # training episodes' seeds stay apart from the evaluation's


@dataclass
class GRPOSettings:
    steps: int = 4
    generations: int = 2
    max_episode_steps: int = 3
    lr: float = 5e-6
    beta: float = 0.0  # KL to the starting agent; 0 (TRL's default) needs no reference copy
    seed: int = 0


def task_prompts(tasks: list[Task]) -> dict[str, Task]:
    """{the task's system prompt: the task}: the prompt is what TRL hands the rollout function back."""
    spec = domain_spec(DOMAIN)
    prompts = {system_prompt(t, spec): t for t in tasks}
    if len(prompts) != len(tasks):
        raise ValueError("two tasks share one instruction: their prompts could not be told apart")
    return prompts


def trainable(played: Played, agent: Agent, task: Task) -> Played:
    """An episode TRL can take: one that failed before the agent spoke (a reset error) gets the task's
    prompt and a lone end-of-turn token, masked out, so it counts in its group with its score of 0."""
    if played.tokens.prompt_ids:
        return played
    tokens, _ = agent.chat.start(system_prompt(task, domain_spec(DOMAIN)), "")
    tokens.add_observation([agent.tokenizer.eos_token_id])
    played.tokens = tokens
    return played


def make_rollout(
    tasks: list[Task],
    tokenizer: Any,
    sampling: Sampling,
    settings: GRPOSettings,
    simulated: Callable[[], Sandbox],
    out: Path,
    log: Callable[[str], None] = print,
) -> Callable[[list, Any], dict]:
    """TRL's rollout_func: whole simulated episodes for the prompts of one generation batch."""
    by_prompt = task_prompts(tasks)
    calls = [0]

    def rollout(prompts: list, trainer: Any) -> dict:
        model = trainer.accelerator.unwrap_model(trainer.model)
        agent = Agent(model, tokenizer, sampling)
        step = trainer.state.global_step
        base = TRAIN_SEED_BASE + settings.seed * 100_000 + calls[0] * 1000
        calls[0] += 1
        jobs = [(by_prompt[p[0]["content"]], base + i) for i, p in enumerate(prompts)]
        was_training = model.training
        model.eval()
        started = time.monotonic()
        try:
            played = play_all(agent, simulated, jobs, settings.max_episode_steps)
        finally:
            model.train(was_training)
        played = [trainable(p, agent, task) for p, (task, _) in zip(played, jobs, strict=True)]
        with (out / ROLLOUTS).open("a") as f:
            for p in played:
                f.write(json.dumps({"step": step + 1, **p.summary()}) + "\n")
        scores = [p.score for p in played]
        log(
            f"step {step + 1}: {len(played)} simulated episodes in {time.monotonic() - started:.0f} s, "
            f"mean simulated reward {sum(scores) / len(scores):.3f}, "
            f"undecided {sum(p.reward is None for p in played)}"
        )
        return {
            "prompt_ids": [p.tokens.prompt_ids for p in played],
            "completion_ids": [p.tokens.completion_ids for p in played],
            "logprobs": [p.tokens.logprobs for p in played],
            "env_mask": [p.tokens.env_mask for p in played],
            "episode_reward": scores,
        }

    return rollout


def episode_reward(prompts: list, completions: list, episode_reward: list[float], **_: Any) -> list[float]:
    """The reward function: the simulated verifier's reward, passed from the rollout by TRL."""
    return [float(r) for r in episode_reward]


def train(
    model: Any,
    tokenizer: Any,
    tasks: list[Task],
    sampling: Sampling,
    settings: GRPOSettings,
    simulated: Callable[[], Sandbox],
    out: Path,
    log: Callable[[str], None] = print,
) -> dict:
    """GRPO for `settings.steps` steps, in place on `model`; what TRL logged, and the time taken."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
    out.mkdir(parents=True, exist_ok=True)
    (out / ROLLOUTS).unlink(missing_ok=True)
    batch = len(tasks) * settings.generations  # every task's group in each step
    config = GRPOConfig(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=batch,
        gradient_accumulation_steps=1,
        num_generations=settings.generations,
        max_steps=settings.steps,
        learning_rate=settings.lr,
        beta=settings.beta,
        temperature=max(sampling.temperature, 1e-3),
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=settings.seed,
        use_cpu=not torch.cuda.is_available(),
        bf16=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
        gradient_checkpointing=False,  # a small agent fits without it, and backward runs faster
    )
    dataset = Dataset.from_list([{"prompt": [{"role": "system", "content": p}]} for p in task_prompts(tasks)])
    rollout = make_rollout(tasks, tokenizer, sampling, settings, simulated, out, log)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[episode_reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    started = time.monotonic()
    trainer.train()
    seconds = time.monotonic() - started
    logged = [row for row in trainer.state.log_history if "loss" in row]
    return {"seconds": round(seconds, 1), "log": logged}


def read_rollouts(out: Path) -> list[dict]:
    path = out / ROLLOUTS
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )

"""python -m training.rl: GSPO on the RL corpus with the hybrid reward (see training/rl/trainer.py)."""

from __future__ import annotations

import argparse
import json
import sys

from training.bases import BASE_HELP
from training.rl.trainer import RLConfig, train
from training.run_options import add_config_options, add_resume_options

EXAMPLES = """examples:
  # rules-only reward on a CPU (no judge endpoint), from the SFT run's checkpoint, top 10 layers trained
  python -m training.rl --corpus out/demo/corpus --base out/demo/sft --out out/demo/rl \\
      --reward rules --max-steps 30 --num-generations 4 --max-prompt-tokens 768 \\
      --max-completion-tokens 160 --train-layers 10 --lr 5e-6

  # the hybrid reward (judge : rules = 9 : 1) with a judge served by vLLM, on a GPU host (vLLM generation)
  python -m training.rl --corpus CORPUS --base runs/sft/final --out runs/rl \\
      --judge-url http://judge:8000/v1 --max-steps 500 --prompts-per-step 8 --num-generations 8

  # after an interruption: the same command plus --resume continues from the last checkpoint under --out
  python -m training.rl --corpus CORPUS --base runs/sft/final --out runs/rl --judge-url URL --resume
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m training.rl",
        description="Sharpen a world model with GSPO (TRL's GRPOTrainer, sequence-level importance "
        "ratios) on one turn per trajectory of the RL corpus, rewarded by an LLM judge and the rule "
        "verifiers.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = RLConfig(corpus="", base="", out="")
    p.add_argument(
        "--corpus", required=True, help="corpus root written by build_corpus (uses CORPUS/rl/<split>)"
    )
    p.add_argument(
        "--base", required=True, help=f"the starting checkpoint, usually the SFT run's: {BASE_HELP}"
    )
    p.add_argument(
        "--out", required=True, help="run directory: checkpoint-N/, final/, metrics.jsonl, summary.json"
    )
    p.add_argument("--split", default=d.split, help="RL corpus split to train on")
    p.add_argument("--domain", action="append", dest="domains", help="train on this domain only (repeatable)")
    p.add_argument(
        "--reward",
        choices=("hybrid", "rules"),
        default=d.reward,
        help="hybrid: judge and rule verifiers (needs --judge-url); rules: the rule verifiers alone",
    )
    p.add_argument("--judge-url", help="OpenAI-compatible endpoint of the judge (vLLM, SGLang, llama.cpp)")
    p.add_argument("--judge-model", help="model name at --judge-url (default: the first served)")
    p.add_argument(
        "--judge-max-chars", type=int, help="cut each text the judge is shown to this (small judges)"
    )
    p.add_argument("--judge-weight", type=float, default=d.judge_weight, help="weight of the judge's score")
    p.add_argument("--rules-weight", type=float, default=d.rules_weight, help="weight of the rule verdict")
    add_config_options(
        p,
        d,
        [
            ("max_steps", int, "optimizer steps"),
            ("prompts_per_step", int, "prompts per step (each sampled --num-generations times)"),
            ("num_generations", int, "completions per prompt: the group whose rewards are normalised"),
            ("max_prompt_tokens", int, "prompts longer than this are left out"),
            ("max_completion_tokens", int, "generation limit per completion"),
            ("temperature", float, "sampling temperature of the rollouts"),
            ("lr", float, "learning rate (constant)"),
            ("beta", float, "KL coefficient against the starting checkpoint (0: no reference model)"),
            ("save_steps", int, "steps between checkpoints"),
            ("keep_last", int, "checkpoints kept (0: all)"),
            ("seed", int, "sampling, shuffling and turn-choice seed"),
        ],
    )
    p.add_argument("--train-layers", type=int, help="train only the top N decoder layers and the final norm")
    p.add_argument(
        "--generation",
        choices=("auto", "vllm", "transformers"),
        default=d.generation,
        help="rollout engine (auto: vLLM when installed and a GPU is present)",
    )
    add_resume_options(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = vars(build_parser().parse_args(argv))
    args["domains"] = tuple(args["domains"] or ())
    cfg = RLConfig(**args)
    try:
        summary = train(cfg)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    first, last = summary["reward_first_third"], summary["reward_last_third"]
    parts = ", ".join(
        f"{k.split('/')[1]} {v:.3f}" for k, v in summary["components_last_third"].items() if v is not None
    )
    print(
        f"GSPO: {summary['steps']} steps on {summary['prompts']} prompts in {summary['elapsed_s']:.0f} s "
        f"({summary['generation']} generation); mean reward {_fmt(first)} in the first third of the steps, "
        f"{_fmt(last)} in the last ({parts}); checkpoint: {summary['checkpoint']}"
    )
    print(json.dumps({k: summary[k] for k in ("steps", "reward_first_third", "reward_last_third")}))
    return 0


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())

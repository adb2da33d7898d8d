"""llama.cpp (a GGUF export) against transformers generating the same world-model replies, same run.

The checkpoint is SmolLM2-135M-Instruct (the demo's base, as a transformers checkpoint); it is exported
with `training.export` to GGUF in f16 and q8_0 and each export generates with the in-process llama.cpp
backend. Every engine answers the same prompts (turns of the recorded terminal trajectories, rendered
as the fidelity evaluation renders them), greedily, with the same max_new_tokens and no repetition
guard, one request at a time; the prompts alternate between engines so that machine noise hits each
alike. transformers also runs the prompts `CONCURRENCY` at a time, which its dynamic batcher turns into
batched generate calls (its best case here); llama.cpp's backend takes one sequence at a time.

Times are whole requests (prompt evaluation included): llama.cpp keeps the previous prompt's KV cache
and evaluates only where the next prompt differs, which consecutive turns of one trajectory share (the
fidelity evaluation's prompts too); transformers evaluates every prompt whole. Tokens are the reply's
token count under the model's tokenizer. Usage:
python -m benchmarks.gguf_generation [MAX_NEW_TOKENS] [PROMPTS]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from schemas import read_trajectories
from schemas.render import chat_messages
from training.backends.base import GenerationConfig, WorldModelBackend
from training.backends.llama_cpp_local import LlamaCppBackend
from training.backends.transformers_local import TransformersBackend
from training.bases import resolve_base
from training.export import export_gguf
from training.fidelity.teacher_forced import fits_chars

BASE = "smollm2-135m-instruct"
TRAJECTORIES = Path(__file__).resolve().parents[1] / "tests" / "beam_pipelines" / "fixtures" / "terminal_run"
CONCURRENCY = 8
CONTEXT_CHARS = 6000  # as `make demo` evaluates


def prompts(count: int) -> list[list[dict]]:
    """The first `count` turns of the recorded terminal trajectories, as fidelity prompts them."""
    found = []
    for t in read_trajectories(str(TRAJECTORIES)):
        for k in range(1, len(t.steps) + 1):
            found.append(chat_messages(t, k, fits=fits_chars(CONTEXT_CHARS)))
            if len(found) == count:
                return found
    return found


def _tokens(backend: WorldModelBackend, reply: str) -> int:
    return len(backend.tokenizer(reply, add_special_tokens=False)["input_ids"])  # type: ignore[attr-defined]


def run(max_new_tokens: int = 96, count: int = 8) -> dict:
    checkpoint = resolve_base(BASE)
    config = GenerationConfig(max_new_tokens=max_new_tokens)
    chats = prompts(count)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        engines: dict[str, WorldModelBackend] = {"transformers": TransformersBackend(checkpoint)}
        exports = {}
        for kind in ("f16", "q8_0"):
            clock = time.perf_counter()
            path = export_gguf(checkpoint, Path(tmp) / f"{kind}.gguf", out_type=kind)
            exports[kind] = {
                "seconds": round(time.perf_counter() - clock, 1),
                "mib": path.stat().st_size >> 20,
            }
            engines[f"llama.cpp {kind}"] = LlamaCppBackend(path)
        # One thread as well: on cores other work keeps busy, llama.cpp's threads wait on each other.
        engines["llama.cpp q8_0 1 thread"] = LlamaCppBackend(Path(tmp) / "q8_0.gguf", n_threads=1)
        seconds = dict.fromkeys(engines, 0.0)
        tokens = dict.fromkeys(engines, 0)
        replies: dict[str, list[str]] = {name: [] for name in engines}
        for backend in engines.values():  # warm-up: first-call allocations are not generation speed
            backend.complete([{"role": "user", "content": "Hello"}], GenerationConfig(max_new_tokens=4))
        for n, chat in enumerate(chats):
            names = list(engines)
            for name in names[n % len(names) :] + names[: n % len(names)]:
                clock = time.perf_counter()
                reply = engines[name].complete(chat, config)
                seconds[name] += time.perf_counter() - clock
                tokens[name] += _tokens(engines[name], reply)
                replies[name].append(reply)
        batched = _concurrent(engines["transformers"], chats, config)
        for backend in engines.values():
            backend.close()
    per_s = {name: tokens[name] / seconds[name] for name in engines}
    return {
        "base": BASE,
        "prompts": len(chats),
        "prompt_source": str(TRAJECTORIES.relative_to(TRAJECTORIES.parents[3])),
        "max_new_tokens": max_new_tokens,
        "cpus": os.cpu_count(),
        "llama_cpp_threads": engines["llama.cpp f16"].n_threads,  # type: ignore[attr-defined]
        "torch_threads": torch.get_num_threads(),
        "load_average_before": [round(x, 2) for x in load],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "exports": exports,
        "tokens": tokens,
        "seconds": {name: round(s, 2) for name, s in seconds.items()},
        "tokens_per_s": {name: round(v, 1) for name, v in per_s.items()},
        "transformers_batched_tokens_per_s": round(batched, 1),
        "speedup_f16": round(per_s["llama.cpp f16"] / per_s["transformers"], 2),
        "speedup_q8_0": round(per_s["llama.cpp q8_0"] / per_s["transformers"], 2),
        "speedup_q8_0_1_thread": round(per_s["llama.cpp q8_0 1 thread"] / per_s["transformers"], 2),
        "speedup_q8_0_vs_batched": round(per_s["llama.cpp q8_0"] / batched, 2),
        "same_reply_as_transformers": {
            name: sum(a == b for a, b in zip(replies[name], replies["transformers"], strict=True))
            for name in engines
            if name != "transformers"
        },
    }


def markdown_lines(r: dict) -> list[str]:
    lines = [
        f"{r['prompts']} world-model prompts ({r['prompt_source']}), greedy, max_new_tokens "
        f"{r['max_new_tokens']}, one request at a time; {r['cpus']} CPUs, llama.cpp threads "
        f"{r['llama_cpp_threads']}, torch threads "
        f"{r['torch_threads']}; load average {r['load_average_before'][0]} before, "
        f"{r['load_average_after'][0]} after (other work on the machine slows every engine).",
        "",
        "| engine | tokens | seconds | tokens/s | x transformers | same reply as transformers |",
        "|---|---|---|---|---|---|",
    ]
    base = r["tokens_per_s"]["transformers"]
    for name, rate in r["tokens_per_s"].items():
        same = r["same_reply_as_transformers"].get(name, "-")
        lines.append(
            f"| {name} | {r['tokens'][name]} | {r['seconds'][name]} | {rate} | {rate / base:.2f} | {same} |"
        )
    lines += [
        "",
        f"transformers with {CONCURRENCY} requests in flight (dynamic batching): "
        f"{r['transformers_batched_tokens_per_s']} tokens/s.",
        "Exports: "
        + ", ".join(f"{k} {v['mib']} MiB in {v['seconds']} s" for k, v in r["exports"].items())
        + ".",
    ]
    return lines


def _concurrent(backend: WorldModelBackend, chats: list[list[dict]], config: GenerationConfig) -> float:
    """Aggregate tokens/s with CONCURRENCY requests in flight (transformers batches them)."""
    clock = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        replies = list(pool.map(lambda chat: backend.complete(chat, config), chats))
    return sum(_tokens(backend, r) for r in replies) / (time.perf_counter() - clock)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    print(json.dumps(run(*args), indent=2))

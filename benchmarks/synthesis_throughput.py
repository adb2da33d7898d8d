"""Reasoning-synthesis throughput: the stage's batch function against a bare client loop, same server.

Both ask one llama.cpp server (SmolLM2-135M, tests/llm_server.py) for the same candidates: the SFT
samples of the recorded terminal trajectories (tests/beam_pipelines/fixtures/terminal_run) formatted
by the corpus pipeline's own formatter, k candidates each (seed + i), the same temperature and token
limit, the same number of requests in flight. The stage is `Synthesizer.synthesize`, the function the
shard builder calls per chunk: requests through its thread pool, the cache written, every candidate
scored by the project's scorer, the reasoning chosen. The baseline is the `openai` client in a thread
pool and nothing else: the endpoint's own throughput at that concurrency. Runs go bare, stage, stage,
bare, so a machine whose load drifts during the benchmark favours neither side; rates are over all
runs of a side; each stage run starts from an empty cache. One untimed bare run first warms the server
(measured here: the first run after start was 25% slower than the rest).
Seeded sampling makes both sides generate mostly the same replies (llama.cpp's reuse of a cached
prompt prefix changes the arithmetic a little, so a few differ): the result counts the identical ones
and the reply tokens of each path, and gives the ratio in reply tokens/s as well.

    python -m benchmarks.run synthesis_throughput     # about 8 minutes on 2 cores
"""

from __future__ import annotations

import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import openai

from beam_pipelines.stages.common import SFT
from beam_pipelines.stages.format import Formatter
from beam_pipelines.stages.synthesis import Synthesizer
from beam_pipelines.synthesis.cache import ReplyCache, cache_key
from beam_pipelines.synthesis.settings import SynthesisConfig
from schemas import read_trajectories
from schemas.chat_tokens import ChatTokenizer
from tests.llm_server import serve_llm

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "beam_pipelines" / "fixtures" / "terminal_run"
TOKENIZER = "smollm2-135m-instruct"
SEQ_LEN = 1536  # prompts within the server's 2,048-token context
TARGET_RATIO = 0.8


def _samples(n: int) -> list:
    formatter = Formatter((SFT,), TOKENIZER, SEQ_LEN, 1)
    samples = []
    for t in sorted(read_trajectories(str(FIXTURE)), key=lambda t: t.trajectory_id):
        samples += [out.value for out in formatter.format("train", t) if out.tag == SFT]
    return samples[:n]


def _bare(client: openai.OpenAI, config: SynthesisConfig, samples: list) -> tuple[float, list[str]]:
    def ask(job: tuple[int, int]) -> str:
        s, i = job
        response = client.chat.completions.create(
            model=config.model,
            messages=list(samples[s].messages),
            seed=config.seed + i,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
        )
        return response.choices[0].message.content or ""

    jobs = [(s, i) for s in range(len(samples)) for i in range(config.k)]
    started = time.perf_counter()
    with ThreadPoolExecutor(config.concurrency) as pool:
        replies = list(pool.map(ask, jobs))
    return time.perf_counter() - started, replies


def _stage(config: SynthesisConfig, samples: list) -> tuple[float, list[str | None], int]:
    with tempfile.TemporaryDirectory() as cache_dir:
        run = replace(config, cache=cache_dir)
        synthesizer = Synthesizer(run)
        try:
            started = time.perf_counter()
            kept, _ = synthesizer.synthesize(samples)
            seconds = time.perf_counter() - started
        finally:
            synthesizer.close()
        cache = ReplyCache(cache_dir, run.k)
        replies = [r for s in samples for r in cache.get(cache_key(s.messages, run))]
    return seconds, replies, len(kept)


def run() -> dict:
    n = int(os.environ.get("SYNTH_BENCH_SAMPLES", "16"))
    k = int(os.environ.get("SYNTH_BENCH_K", "2"))
    concurrency = int(os.environ.get("SYNTH_BENCH_CONCURRENCY", "8"))
    max_tokens = int(os.environ.get("SYNTH_BENCH_MAX_TOKENS", "64"))
    samples = _samples(n)
    candidates = len(samples) * k
    bare_s: list[float] = []
    stage_s: list[float] = []
    bare_tokens: list[int] = []
    stage_tokens: list[int] = []
    tokenizer = ChatTokenizer(TOKENIZER).tokenizer  # counts reply tokens the same way on both paths

    def tokens(replies: list) -> int:
        return sum(len(tokenizer.encode(r or "", add_special_tokens=False)) for r in replies)

    with serve_llm() as server:
        config = SynthesisConfig(
            server.base_url, server.model, k=k, max_tokens=max_tokens, concurrency=concurrency, threshold=-1
        )
        client = openai.OpenAI(base_url=server.base_url, api_key="EMPTY", timeout=600, max_retries=0)
        _bare(client, config, samples)  # warm-up, untimed
        for side in ("bare", "stage", "stage", "bare"):
            if side == "bare":
                seconds, bare_replies = _bare(client, config, samples)
                bare_s.append(seconds)
                bare_tokens.append(tokens(bare_replies))
            else:
                seconds, stage_replies, kept = _stage(config, samples)
                stage_s.append(seconds)
                stage_tokens.append(tokens(stage_replies))
        client.close()
    same = sum(a == b for a, b in zip(bare_replies, stage_replies, strict=True))
    bare_rate = candidates * len(bare_s) / sum(bare_s)
    stage_rate = candidates * len(stage_s) / sum(stage_s)
    ratio = stage_rate / bare_rate
    bare_token_rate = sum(bare_tokens) / sum(bare_s)
    stage_token_rate = sum(stage_tokens) / sum(stage_s)
    return {
        "settings": {
            "samples": len(samples),
            "k": k,
            "candidates": candidates,
            "concurrency": concurrency,
            "max_tokens": max_tokens,
            "temperature": config.temperature,
            "server": "llama-cpp-python server, SmolLM2-135M-Instruct Q4_1, one request at a time",
        },
        "bare_client_s": bare_s,
        "stage_s": stage_s,
        "bare_candidates_per_s": bare_rate,
        "stage_candidates_per_s": stage_rate,
        "ratio": ratio,
        "bare_reply_tokens": bare_tokens,
        "stage_reply_tokens": stage_tokens,
        "bare_reply_tokens_per_s": bare_token_rate,
        "stage_reply_tokens_per_s": stage_token_rate,
        "token_ratio": stage_token_rate / bare_token_rate,
        "target_ratio": TARGET_RATIO,
        "met": min(ratio, stage_token_rate / bare_token_rate) >= TARGET_RATIO,
        "identical_replies": f"{same}/{candidates}",
        "kept_samples_at_threshold_-1": kept,
    }


def markdown_lines(r: dict) -> list[str]:
    s = r["settings"]
    return [
        f"{s['samples']} SFT samples x k={s['k']} = {s['candidates']} candidates, {s['max_tokens']} tokens "
        f"each, {s['concurrency']} in flight, against one server ({s['server']}); "
        "after an untimed warm-up, 2 runs each in the order bare, stage, stage, bare.",
        "",
        "| path | candidates/s | reply tokens/s | seconds per run | reply tokens per run |",
        "|---|---:|---:|---|---|",
        f"| bare openai client, thread pool | {r['bare_candidates_per_s']:.2f} | "
        f"{r['bare_reply_tokens_per_s']:.1f} | {', '.join(f'{x:.1f}' for x in r['bare_client_s'])} | "
        f"{', '.join(map(str, r['bare_reply_tokens']))} |",
        f"| synthesis stage (ask, cache, score, select) | {r['stage_candidates_per_s']:.2f} | "
        f"{r['stage_reply_tokens_per_s']:.1f} | {', '.join(f'{x:.1f}' for x in r['stage_s'])} | "
        f"{', '.join(map(str, r['stage_reply_tokens']))} |",
        "",
        f"Ratio {r['ratio']:.2f}x in candidates/s, {r['token_ratio']:.2f}x in reply tokens/s (target >= "
        f"{r['target_ratio']}x: {'met' if r['met'] else 'NOT met'}); identical replies on both paths "
        f"(each side's last run): {r['identical_replies']}.",
    ]

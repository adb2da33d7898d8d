"""Corpus pipeline benchmark (issue 3): throughput against the tokenizer's ceiling and datatrove, peak
RSS as the input doubles, and determinism, all in one run on the same machine.

- ours: `python -m beam_pipelines.build_corpus` as a subprocess with its defaults (FnApiRunner, one
  worker process per core), wall time from process start to exit; tokens = SFT + CPT tokens written.
- ceiling: every document the pipeline wrote, decoded back to its rendered text (chunks of a cut
  document joined first), then the same tokenizer's `encode_batch_fast` over all those texts in one
  process (the Rust encoder uses every core); only the encode calls are timed.
- datatrove: the same rendered documents as Parquet, through datatrove's own components: ParquetReader ->
  its 3-stage exact dedup (ExactDedupSignature, ExactFindDedups, ExactDedupFilter) -> DocumentTokenizer
  (same tokenizer.json, no shuffling, no added EOS: the texts carry ours) writing its token files;
  LocalPipelineExecutor with one task per input file and one worker per core; wall time of all three
  stages in a subprocess.
- memory: peak of the summed RSS of the pipeline's process tree (psutil, sampled every 0.1 s) at n/2
  and n trajectories.
- determinism: the n/10 input twice; SHA-256 of every file under OUT (report.json and report.md hold
  no timings) must match.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.corpus_data import CACHE, build_corpus

ROOT = Path(__file__).resolve().parent.parent
WORK = os.path.join(CACHE, "work")
TARGET_CEILING_RATIO = 0.85
TARGET_RSS_GROWTH = 0.20


def _sampled_run(cmd: list[str], env: dict | None = None) -> tuple[float, int]:
    """(wall seconds, peak summed RSS bytes of the process tree) of `cmd`, which must succeed."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak = 0
    done = threading.Event()
    output: list[bytes] = []
    reader = threading.Thread(target=lambda: (output.append(proc.stdout.read()), done.set()))
    reader.start()
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        total = 0
        try:
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        peak = max(peak, total)
        time.sleep(0.1)
    seconds = time.monotonic() - started
    reader.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}):\n{b''.join(output).decode()[-3000:]}")
    return seconds, peak


def run_ours(corpus: str, out: str) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "beam_pipelines.build_corpus", "--input", corpus, "--output", out]
    seconds, peak = _sampled_run(cmd)
    report = json.loads(Path(out, "report.json").read_text())
    tokens = sum(g.get("tokens", 0) for c in ("sft", "cpt") for g in report["outputs"].get(c, {}).values())
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds, "peak_rss_bytes": peak}


def output_digest(out: str) -> dict[str, str]:
    return {
        str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(out).rglob("*"))
        if p.is_file()
    }


def _documents(shard: Path) -> tuple[list[str], list[list[int]]]:
    """(doc ids, token ids) of one token shard, chunks of a cut document joined in order."""
    table = pq.read_table(shard, columns=["input_ids", "doc_lengths", "doc_ids"])
    ids = table.column("input_ids").combine_chunks().flatten().to_numpy()
    lengths = table.column("doc_lengths").combine_chunks().flatten().to_numpy()
    names = table.column("doc_ids").combine_chunks().flatten().to_pylist()
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    docs: dict[str, list[tuple[int, np.ndarray]]] = {}
    for name, start, end in zip(names, bounds[:-1], bounds[1:], strict=True):
        base, _, part = name.partition("@")
        docs.setdefault(base, []).append((int(part or 0), ids[start:end]))
    order = sorted(docs)
    return order, [
        np.concatenate([a for _, a in sorted(docs[d], key=lambda x: x[0])]).tolist() for d in order
    ]


def ceiling_and_texts(out: str, texts_dir: str, batch: int = 1024) -> dict:
    """Decode what `out` holds to text (written to `texts_dir` as Parquet for datatrove) and time the
    tokenizer's encode_batch_fast over all of it."""
    from beam_pipelines.stages.tokenise import ChatTokenizer

    tokenizer = ChatTokenizer().tokenizer
    shutil.rmtree(texts_dir, ignore_errors=True)
    os.makedirs(texts_dir)
    encode_s, tokens, documents, chars = 0.0, 0, 0, 0
    for n, shard in enumerate(sorted(Path(out).glob("*/*/*.parquet"))):
        if shard.parts[-3] not in ("sft", "cpt"):
            continue
        names, ids = _documents(shard)
        texts = tokenizer.decode_batch(ids, skip_special_tokens=False)
        pq.write_table(pa.table({"id": names, "text": texts}), os.path.join(texts_dir, f"{n:04d}.parquet"))
        for i in range(0, len(texts), batch):
            chunk = texts[i : i + batch]
            t0 = time.perf_counter()
            encoded = tokenizer.encode_batch_fast(chunk, add_special_tokens=False)
            encode_s += time.perf_counter() - t0
            tokens += sum(len(e) for e in encoded)
        documents += len(texts)
        chars += sum(map(len, texts))
    return {
        "seconds": encode_s,
        "tokens": tokens,
        "tokens_per_s": tokens / encode_s,
        "documents": documents,
        "characters": chars,
    }


_DATATROVE = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.exact_dedup import (
    ExactDedupConfig, ExactDedupFilter, ExactDedupSignature, ExactFindDedups)
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.tokens import DocumentTokenizer

texts, work, tokenizer = sys.argv[1:4]
tasks, workers = int(sys.argv[4]), int(sys.argv[5])
config = ExactDedupConfig(content_getter=lambda doc: doc.text.encode())
sign = LocalPipelineExecutor(
    [ParquetReader(texts), ExactDedupSignature(f"{work}/sigs", config=config)],
    tasks=tasks, workers=workers, logging_dir=f"{work}/logs/sign")
find = LocalPipelineExecutor(
    [ExactFindDedups(f"{work}/sigs", f"{work}/dups", config=config)],
    tasks=1, workers=1, logging_dir=f"{work}/logs/find", depends=sign)
tokenise = LocalPipelineExecutor(
    [ParquetReader(texts), ExactDedupFilter(f"{work}/dups", config=config),
     DocumentTokenizer(f"{work}/tokens", tokenizer_name_or_path=tokenizer, eos_token=None,
                       shuffle_documents=False, batch_size=1000)],
    tasks=tasks, workers=workers, logging_dir=f"{work}/logs/tokenise", depends=find)
tokenise.run()
"""


def run_datatrove(texts_dir: str, work: str) -> dict:
    from schemas.tokenizer_files import default_tokenizer_dir

    shutil.rmtree(work, ignore_errors=True)
    tasks = len(os.listdir(texts_dir))
    workers = os.cpu_count() or 1
    tokenizer = os.path.join(default_tokenizer_dir(), "tokenizer.json")
    cmd = [sys.executable, "-c", _DATATROVE, texts_dir, work, tokenizer, str(tasks), str(workers)]
    env = {**os.environ, "DATATROVE_COLORIZE_LOGS": "0"}
    seconds, peak = _sampled_run(cmd, env)
    # uint32 tokens (the vocabulary is over 65,536) in the .ds files
    tokens = sum(p.stat().st_size for p in Path(work, "tokens").rglob("*.ds")) // 4
    config = f"tasks={tasks}, workers={workers}, DocumentTokenizer batch_size=1000, shuffle_documents=False"
    return {
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "peak_rss_bytes": peak,
        "config": config,
    }


def corpus_benchmark(n: int = 20_000) -> dict:
    load_start = os.getloadavg()
    full, half_input, small = build_corpus(n), build_corpus(n // 2), build_corpus(n // 10)
    ours = run_ours(full, os.path.join(WORK, "ours"))
    ceiling = ceiling_and_texts(os.path.join(WORK, "ours"), os.path.join(WORK, "texts"))
    peer = run_datatrove(os.path.join(WORK, "texts"), os.path.join(WORK, "datatrove"))
    half = run_ours(half_input, os.path.join(WORK, "half"))
    # determinism on n/10 trajectories, twice (two more runs at n would double the benchmark's time)
    for name in ("small_a", "small_b"):
        run_ours(small, os.path.join(WORK, name))
    digest_a = output_digest(os.path.join(WORK, "small_a"))
    digest_b = output_digest(os.path.join(WORK, "small_b"))
    different = sorted(k for k in digest_a.keys() | digest_b.keys() if digest_a.get(k) != digest_b.get(k))
    report = json.loads(Path(WORK, "ours", "report.json").read_text())
    dedup = report["stages"].get("dedup", {})
    peak_half = half["peak_rss_bytes"]
    growth = ours["peak_rss_bytes"] / peak_half - 1
    ratio = ours["tokens_per_s"] / ceiling["tokens_per_s"]
    return {
        "trajectories": n,
        "ours": ours,
        "ceiling": ceiling,
        "ratio_to_ceiling": ratio,
        "ceiling_target": TARGET_CEILING_RATIO,
        "ceiling_met": ratio >= TARGET_CEILING_RATIO,
        "datatrove": peer,
        "ours_over_datatrove": ours["tokens_per_s"] / peer["tokens_per_s"],
        "datatrove_met": ours["tokens_per_s"] >= peer["tokens_per_s"],
        "memory": {
            "half_n": n // 2,
            "peak_rss_half_bytes": peak_half,
            "peak_rss_full_bytes": ours["peak_rss_bytes"],
            "growth": growth,
            "target": TARGET_RSS_GROWTH,
            "met": growth < TARGET_RSS_GROWTH,
            "half_run_seconds": half["seconds"],
        },
        "determinism": {
            "trajectories": n // 10,
            "files": len(digest_a),
            "identical": not different,
            "different": different[:20],
        },
        "dedup": dedup,
        "stages": report["stages"],
        "load_average": {"start": load_start, "end": os.getloadavg()},
    }


if __name__ == "__main__":
    print(json.dumps(corpus_benchmark(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000), indent=1))

"""Training throughput of the real training step (`training.loop.weighted_loss_sum` + AdamW + clipping).

`cpu_throughput`: tokens/s of the small shape on this machine's CPU, beside a plain fp32 matmul's
FLOP/s measured in the same run (the ratio is what survives a noisy, shared machine).
`gpu_throughput`: tokens/s and model FLOPs utilisation (MFU) of a Qwen3-0.6B-shaped model in bf16
autocast, against the GPU's dense bf16 peak from NVIDIA's datasheets and against a plain bf16 matmul
measured in the same run (the practical ceiling). FLOPs per token follow `model_flops_per_token`
(PaLM / torchtitan formula). `run()` is what `make bench` calls.

    python -m benchmarks.training_throughput cpu
    python -m benchmarks.training_throughput gpu --compile --out gpu.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from training.data import Batch, collate
from training.loop import weighted_loss_sum
from training.models import build_model, model_flops_per_token, parameter_counts

# Dense (no structured sparsity) BF16 tensor-core FLOP/s: half the "with sparsity" datasheet figure.
# Sources: NVIDIA H100 Tensor Core GPU datasheet (H100 SXM 1,979 / NVL 1,671 / PCIe 1,513 TFLOPS
# sparse); NVIDIA H200 datasheet (1,979 TFLOPS sparse); NVIDIA A100 datasheet (312 TFLOPS dense).
PEAK_BF16_DENSE = (  # matched in order against torch.cuda.get_device_name()
    ("H200", 989.4e12),
    ("H100 NVL", 835.5e12),
    ("H100 PCIe", 756.5e12),
    ("H100", 989.4e12),
    ("A100", 312e12),
)


def peak_bf16(device_name: str) -> float | None:
    return next((peak for key, peak in PEAK_BF16_DENSE if key in device_name), None)


def synthetic_batch(batch: int, seq_len: int, vocab: int, docs_per_row: int = 1, seed: int = 0) -> Batch:
    """Random tokens, every one trained; `docs_per_row` > 1 packs documents (per-document attention)."""
    g = torch.Generator().manual_seed(seed)
    cuts = [seq_len // docs_per_row] * docs_per_row
    cuts[-1] += seq_len - sum(cuts)
    rows = [
        {
            "input_ids": torch.randint(0, vocab, (seq_len,), generator=g),
            "loss_mask": torch.ones(seq_len, dtype=torch.int8),
            "doc_lengths": torch.tensor(cuts),
            "doc_echo": torch.zeros(docs_per_row, dtype=torch.bool),
        }
        for _ in range(batch)
    ]
    return collate(rows, echo_weight=1.0)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(
    model: torch.nn.Module, batch: Batch, steps: int, warmup: int, bf16: bool, device: torch.device
) -> float:
    """Seconds per optimizer step (forward, backward, clipping, AdamW), after `warmup` steps."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    weight = batch.loss_weight.sum()

    def step() -> None:
        (weighted_loss_sum(model, batch, bf16) / weight).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    return (time.perf_counter() - t0) / steps


def matmul_flops(n: int, dtype: torch.dtype, device: torch.device, repeats: int) -> float:
    """FLOP/s of a plain n x n x n matmul: the ceiling a training step could reach on this device."""
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    a @ b
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return 2 * n**3 * repeats / (time.perf_counter() - t0)


def cpu_throughput(model: str = "qwen3-small", seq_len: int = 256, batch: int = 1, steps: int = 3) -> dict:
    device = torch.device("cpu")
    m = build_model(model).train()
    data = synthetic_batch(batch, seq_len, m.config.vocab_size)
    baseline = matmul_flops(1024, torch.float32, device, repeats=20)
    step_s = time_steps(m, data, steps, warmup=1, bf16=False, device=device)
    flops = model_flops_per_token(m.config, seq_len)
    tokens_per_s = batch * seq_len / step_s
    return {
        "model": model,
        "parameters": parameter_counts(m),
        "threads": torch.get_num_threads(),
        "seq_len": seq_len,
        "batch": batch,
        "step_s": step_s,
        "tokens_per_s": tokens_per_s,
        "model_flops_per_token": flops,
        "achieved_gflops": tokens_per_s * flops / 1e9,
        "matmul_fp32_gflops": baseline / 1e9,
        "ratio_to_matmul": tokens_per_s * flops / baseline,
    }


def gpu_throughput(
    model: str = "qwen3-0.6b",
    seq_len: int = 2048,
    batch: int = 8,
    steps: int = 10,
    warmup: int = 3,
    compile: bool = False,
    docs_per_row: int = 1,
) -> dict:
    if not torch.cuda.is_available():
        raise RuntimeError("gpu_throughput needs a CUDA device")
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    ceiling = matmul_flops(8192, torch.bfloat16, device, repeats=50)
    m = build_model(model, device=device).train()  # fp32 master weights; bf16 autocast as in training
    if compile:
        m.compile()
    while True:
        try:
            data = synthetic_batch(batch, seq_len, m.config.vocab_size, docs_per_row).to(device)
            t0 = time.perf_counter()
            step_s = time_steps(m, data, steps, warmup, bf16=True, device=device)
            warm_s = time.perf_counter() - t0 - steps * step_s
            break
        except torch.OutOfMemoryError:
            if batch == 1:
                raise
            batch //= 2  # fall back to a batch that fits, and say so in the result
            torch.cuda.empty_cache()
    flops = model_flops_per_token(m.config, seq_len)
    tokens_per_s = batch * seq_len / step_s
    peak = peak_bf16(name)
    return {
        "device": name,
        "model": model,
        "parameters": parameter_counts(m),
        "seq_len": seq_len,
        "batch": batch,
        "docs_per_row": docs_per_row,
        "compile": compile,
        "warmup_s": warm_s,
        "step_s": step_s,
        "tokens_per_s": tokens_per_s,
        "model_flops_per_token": flops,
        "achieved_tflops": tokens_per_s * flops / 1e12,
        "peak_bf16_dense_tflops": peak / 1e12 if peak else None,
        "mfu": tokens_per_s * flops / peak if peak else None,
        "matmul_bf16_tflops": ceiling / 1e12,
        "fraction_of_matmul": tokens_per_s * flops / ceiling,
        "max_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30,
        "torch": torch.__version__,
    }


def run() -> dict:
    """`make bench`: the CPU figure always, the GPU figure when a GPU is present."""
    result = {"cpu": cpu_throughput()}
    if torch.cuda.is_available():
        result["gpu"] = gpu_throughput()
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", choices=["cpu", "gpu"])
    p.add_argument("--model")
    p.add_argument("--seq-len", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--compile", action="store_true", help="gpu: torch.compile the model")
    p.add_argument("--docs-per-row", type=int, default=1, help="gpu: packed documents per row")
    p.add_argument("--out", help="write the result here as JSON")
    args = p.parse_args()
    given = {k: v for k, v in vars(args).items() if k in ("model", "seq_len", "batch", "steps") and v}
    if args.target == "gpu":
        result = gpu_throughput(**given, compile=args.compile, docs_per_row=args.docs_per_row)
    else:
        result = cpu_throughput(**given)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

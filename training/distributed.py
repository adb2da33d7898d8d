"""Process groups and model wrapping for `torchrun`; a plain single process when WORLD_SIZE is unset.

The model code knows nothing of this: `wrap` returns DDP, or an FSDP2 (`fully_shard`) model sharded
per decoder layer for models whose weights, gradients and optimizer state do not fit one device.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Dist:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    enabled: bool  # a process group exists (torchrun, even with one process)

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup(device: str | None = None) -> Dist:
    """Reads torchrun's RANK/WORLD_SIZE/LOCAL_RANK; NCCL on CUDA, Gloo on CPU. Under torchrun a group
    is made even for one process, so FSDP runs (and is checked) on a single device."""
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if device is None:
        device = f"cuda:{local}" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if (world > 1 or "MASTER_ADDR" in os.environ) and not dist.is_initialized():
        dist.init_process_group(
            "nccl" if dev.type == "cuda" else "gloo", device_id=dev if dev.type == "cuda" else None
        )
    return Dist(rank, world, local, dev, dist.is_initialized())


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def wrap(model: nn.Module, d: Dist, fsdp: bool = False) -> nn.Module:
    """`model` on its device, wrapped for data parallelism when there are several ranks."""
    model = model.to(d.device)
    if fsdp:
        if not d.enabled:
            raise ValueError("--fsdp shards a model over processes: launch with torchrun --nproc-per-node N")
        from torch.distributed.fsdp import fully_shard

        for layer in model.model.layers:  # each decoder layer is gathered only while it runs
            fully_shard(layer)
        return fully_shard(model)
    if d.enabled:
        return nn.parallel.DistributedDataParallel(
            model, device_ids=[d.device] if d.device.type == "cuda" else None
        )
    return model


def unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


@contextlib.contextmanager
def gradient_sync(model: nn.Module, sync: bool) -> Iterator[None]:
    """Skips the gradient all-reduce on micro-batches before the last one of an accumulation."""
    if isinstance(model, nn.parallel.DistributedDataParallel) and not sync:
        with model.no_sync():
            yield
        return
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(sync)
    yield


def all_sum(value: float, d: Dist) -> float:
    if not d.enabled:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=d.device)
    dist.all_reduce(t)
    return float(t.item())

"""Checkpoints: a Hugging Face model directory (transformers and vLLM load it as is) plus
`trainer_state.pt` with everything an exact resume needs (optimizer, schedule, step, RNG, data position).

State dicts go through `torch.distributed.checkpoint.state_dict`, which gives the same full,
unsharded, name-keyed dicts for a plain module, DDP and FSDP2, so a run can resume under another
wrapping. A checkpoint is written to a temporary directory and renamed: a killed run never leaves a
torn one under a final name.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from training.distributed import Dist, unwrap
from training.tokenizer import copy_tokenizer

STATE_FILE = "trainer_state.pt"
_NAME = re.compile(r"^checkpoint-(\d+)$")
_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _gather(value: Any, d: Dist) -> list[Any]:
    if not d.enabled:
        return [value]
    out: list[Any] = [None] * d.world_size
    dist.all_gather_object(out, value)
    return out


def save(
    out: str,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    tokenizer_dir: str,
    data_position: dict[str, int],
    d: Dist,
    keep_last: int = 3,
    metadata: dict[str, dict] | None = None,
) -> str:
    """Writes OUT/checkpoint-<step>; every rank must call it (the state dicts are collectives).
    `metadata` maps file names to JSON written beside the weights (the run's lineage)."""
    weights = get_model_state_dict(model, options=_FULL)
    optim = get_optimizer_state_dict(model, optimizer, options=_FULL)
    positions, rngs = _gather(data_position, d), _gather(rng_state(), d)
    final = os.path.join(out, f"checkpoint-{step:06d}")
    if d.main:
        tmp = f"{final}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        unwrap(model).save_pretrained(tmp, state_dict=weights, safe_serialization=True)
        copy_tokenizer(tokenizer_dir, tmp)
        for name, content in (metadata or {}).items():
            with open(os.path.join(tmp, name), "w") as f:
                json.dump(content, f, indent=1)
        state = {
            "step": step,
            "optimizer": optim,
            "scheduler": scheduler.state_dict(),
            "data_positions": positions,
            "rng": rngs,
            "world_size": d.world_size,
        }
        torch.save(state, os.path.join(tmp, STATE_FILE))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in checkpoints(out)[:-keep_last] if keep_last > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    if d.enabled:
        dist.barrier()
    return final


def checkpoints(out: str) -> list[str]:
    """Complete checkpoints under `out`, oldest first."""
    if not os.path.isdir(out):
        return []
    found = [(int(m.group(1)), n) for n in os.listdir(out) if (m := _NAME.match(n))]
    return [
        os.path.join(out, n) for _, n in sorted(found) if os.path.exists(os.path.join(out, n, STATE_FILE))
    ]


def load_state(
    path: str,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    d: Dist,
) -> tuple[int, dict[str, int] | None]:
    """Restores optimizer, schedule and RNG (the weights come from `build_model(path)`); returns the
    step and this rank's data position (None when the world size changed: the epoch restarts)."""
    state = torch.load(os.path.join(path, STATE_FILE), map_location="cpu", weights_only=False)
    set_optimizer_state_dict(model, optimizer, optim_state_dict=state["optimizer"], options=_FULL)
    scheduler.load_state_dict(state["scheduler"])
    same_world = state["world_size"] == d.world_size
    set_rng_state(state["rng"][d.rank if same_world else 0])
    return state["step"], state["data_positions"][d.rank] if same_world else None

"""What the corpus stages share: corpus names, the records passed between format, tokenise and pack,
the reference to a parked trajectory, and the output-shard arithmetic. A leaf: it imports no stage.
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass
from typing import NamedTuple

SFT, CPT, RL, AGENTWORLDBENCH = "sft", "cpt", "rl", "agentworldbench"
CORPORA = (SFT, CPT, RL, AGENTWORLDBENCH)
EVAL_SPLIT = "test"  # the split AgentWorldBench files are made from
# Beside the AgentWorldBench files (whose records keep exactly the public fields): one line per
# trajectory with its task and task reward, under agentworldbench/tasks/.
AGENTWORLDBENCH_TASKS = "agentworldbench_tasks"

ShardKey = tuple[str, str, str, int, int]  # corpus, split, domain, shard, shard count
ShardGroup = tuple[str, str, int, int]  # split, domain, shard, shard count


@dataclass(frozen=True)
class Sample:
    """A text to tokenise. SFT: `messages` is the prompt and `text` the assistant target; CPT: `text`
    is the whole document and `messages` is None."""

    corpus: str
    doc_id: str
    split: str
    domain: str
    text: str
    messages: tuple[dict, ...] | None = None
    echo: bool = False
    # SFT: the history's observations are trained too, after this header (`--history-loss`).
    history_loss_after: str = ""


class TokenisedDoc(NamedTuple):
    corpus: str
    split: str
    domain: str
    doc_id: str
    ids: bytes  # little-endian int32
    loss_start: int
    echo: bool
    history_spans: tuple[tuple[int, int], ...] = ()  # [start, end) token ranges trained before loss_start


class Parked(NamedTuple):
    """Where one trajectory was parked (see `beam_pipelines.stages.park`), all that is grouped of it."""

    trajectory_id: str
    domain: str
    split: str
    path: str  # the parked file (URI or local path)
    offset: int
    length: int
    digest: bytes  # of the parked bytes: picks one record among several with the same id

    def packed(self) -> bytes:
        """The reference as bytes, the form `SpillByKey` groups it in (see `beam_pipelines.stages.spill`)."""
        return pickle.dumps(tuple(self), protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def unpacked(cls, data: bytes) -> Parked:
        return cls(*pickle.loads(data))


def shard_of(key: str, n: int) -> int:
    """A shard index stable across processes and machines (unlike `hash`)."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") % n


def shards_for(split: str, shards: int) -> int:
    # evaluation splits are small: one file each
    return shards if split == "train" else 1


def shard_group(ref: Parked, shards: int) -> ShardGroup:
    """The output shard every file made from this trajectory goes to."""
    n = shards_for(ref.split, shards)
    return ref.split, ref.domain, shard_of(ref.trajectory_id, n), n


def shard_name(domain: str, shard: int, of: int) -> str:
    return f"{domain}-{shard:05d}-of-{of:05d}"

"""Which episodes a collector runs: task files and embedded suites (`sandboxes.tasks`, re-exported
here for the fleet), and `--shard I/N`, the episode slots one pod of N records."""

from __future__ import annotations

from dataclasses import dataclass

from sandboxes.tasks import TaskLoadError, TaskSpec, embedded_tasks, load_tasks, parse_task, parse_task_lines

__all__ = [
    "Shard",
    "TaskLoadError",
    "TaskSpec",
    "embedded_tasks",
    "load_tasks",
    "parse_task",
    "parse_task_lines",
]


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (`--shard i/n`): the episode slots with `slot % count == index`.

    Slots, not tasks, are split, so shards stay even when episodes repeat a short task list, and
    the split depends on nothing but the slot number: shards are disjoint, together they cover
    every slot, and a restarted shard owns exactly the slots it owned before.
    """

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: need 0 <= i < n")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """'i/n' with 0 <= i < n, e.g. '0/4' for the first of four pods; ValueError otherwise."""
        index, slash, count = text.strip().partition("/")
        if not slash or not index.isdigit() or not count.isdigit():
            raise ValueError(f"--shard takes I/N such as 0/4 (shard I of N, counted from 0), not {text!r}")
        if int(count) < 1:
            raise ValueError(f"--shard {text}: N (the number of shards) must be at least 1")
        if int(index) >= int(count):
            last = f"{int(count) - 1}/{count}"
            raise ValueError(f"--shard {text}: I counts from 0 and must be below N (0/{count} .. {last})")
        return cls(int(index), int(count))

    def owns(self, slot: int) -> bool:
        return slot % self.count == self.index

    def slots(self, episodes: int) -> list[int]:
        return list(range(self.index, episodes, self.count))

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

"""Replays the actions of a recorded dataset, step for step: the basis of sim-vs-real comparison.

Episodes are matched by task id and the episode number the runner stores in
`task.metadata["episode"]` (the n-th run of that task). Trajectories without that number are
numbered per task in the order they started.

The dataset is read one trajectory at a time and only what a replay needs is kept (the task, the
order keys and the actions), so memory follows the actions, not the recorded observations; `limit`
stops reading after that many trajectories.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict
from dataclasses import dataclass
from itertools import islice

from collectors.policies.base import Policy
from collectors.tasks import TaskSpec
from schemas import read_trajectories
from schemas.records import Action, Observation, Task, Trajectory


class ReplayPolicy(Policy):
    name = "replay"

    def __init__(self, episodes: dict[str, list[list[Action]]], tasks: list[Task], source: str = "") -> None:
        self._episodes = episodes
        self._tasks = tasks
        self.source = source
        self._queue: list[Action] = []

    @classmethod
    def from_dataset(cls, path: str, limit: int | None = None) -> ReplayPolicy:
        by_task: dict[str, list[_Recorded]] = defaultdict(list)
        for trajectory in islice(read_trajectories(path), limit):
            by_task[trajectory.task.id].append(_Recorded.of(trajectory))
        if not by_task:
            raise ValueError(f"no trajectories to replay in {path}")
        episodes: dict[str, list[list[Action]]] = {}
        tasks: list[Task] = []
        for group in by_task.values():
            group.sort(key=lambda r: r.episode_order)
        # Tasks in the order the recording first ran them, so slot k replays the recording's slot k.
        for task_id, group in sorted(by_task.items(), key=lambda item: item[1][0].slot_order):
            episodes[task_id] = [r.actions for r in group]
            task = copy.deepcopy(group[0].task)
            for key in ("episode", "slot"):
                task.metadata.pop(key, None)
            tasks.append(task)
        return cls(episodes, tasks, source=path)

    def clone(self) -> ReplayPolicy:
        """A policy for another worker, sharing the loaded episodes."""
        return ReplayPolicy(self._episodes, self._tasks, source=self.source)

    def task_specs(self) -> list[TaskSpec]:
        """The recorded tasks, so a replay run sets up the same workspaces."""
        return [TaskSpec(task=copy.deepcopy(task)) for task in self._tasks]

    @property
    def episode_count(self) -> int:
        """Recorded episodes; with `task_specs()` as tasks, slots 0..count-1 cover each once."""
        return sum(len(runs) for runs in self._episodes.values())

    def config(self) -> dict:
        return {"source": self.source}

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        runs = self._episodes.get(task.id, [])
        episode = task.metadata.get("episode", 0)
        if isinstance(episode, int) and 0 <= episode < len(runs):
            self._queue = [copy.deepcopy(action) for action in runs[episode]]
        else:
            self._queue = []

    def act(self, observation: Observation) -> Action | None:
        return self._queue.pop(0) if self._queue else None


@dataclass
class _Recorded:
    """What a replay keeps of one recorded trajectory."""

    task: Task
    actions: list[Action]
    episode_order: tuple[int, str, str]
    slot_order: tuple[int, str, str]

    @classmethod
    def of(cls, t: Trajectory) -> _Recorded:
        return cls(t.task, [s.action for s in t.steps], _order(t, "episode"), _order(t, "slot"))


def _order(t: Trajectory, key: str) -> tuple[int, str, str]:
    number = t.task.metadata.get(key)
    return (
        number if isinstance(number, int) else 1 << 30,
        t.provenance.started_at.isoformat(),
        t.trajectory_id,
    )

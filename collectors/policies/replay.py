"""Replays the actions of a recorded dataset, step for step: the basis of sim-vs-real comparison.

Episodes are matched by task id and the episode number the runner stores in
`task.metadata["episode"]` (the n-th run of that task). Trajectories without that number are
numbered per task in the order they started.
"""

from __future__ import annotations

import copy
import random
from collections import defaultdict

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
    def from_dataset(cls, path: str) -> ReplayPolicy:
        by_task: dict[str, list[Trajectory]] = defaultdict(list)
        for trajectory in read_trajectories(path):
            by_task[trajectory.task.id].append(trajectory)
        if not by_task:
            raise ValueError(f"no trajectories to replay in {path}")
        episodes: dict[str, list[list[Action]]] = {}
        tasks: list[Task] = []
        for group in by_task.values():
            group.sort(key=_episode_order)
        # Tasks in the order the recording first ran them, so slot k replays the recording's slot k.
        for task_id, group in sorted(by_task.items(), key=lambda item: _episode_order(item[1][0], "slot")):
            episodes[task_id] = [[step.action for step in t.steps] for t in group]
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


def _episode_order(t: Trajectory, key: str = "episode") -> tuple[int, str, str]:
    number = t.task.metadata.get(key)
    return (
        number if isinstance(number, int) else 1 << 30,
        t.provenance.started_at.isoformat(),
        t.trajectory_id,
    )

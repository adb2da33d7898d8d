"""The agent on the real terminal, before and after training, and the difference with its interval.

Each task is played `episodes` times with seeds fixed by (task, repeat), so the agent before and the
agent after face the same sampling noise on the same task: the pairs are (task, repeat). The
difference is `training.fidelity.bootstrap.paired_difference` (after minus before), clustered by task:
episodes of one task share its difficulty, so the task is the unit resampled, and an interval from
few tasks is wide, as it should be.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from sandboxes.base import Sandbox
from schemas.records import Task
from training.agent_rl.play import Agent, Played, play_all
from training.fidelity.bootstrap import paired_difference


def eval_seed(task_id: str, repeat: int, seed: int) -> int:
    """The sampling seed of one evaluation episode: the same before and after training."""
    return (zlib.crc32(task_id.encode()) + 7919 * repeat + 104_729 * seed) % (2**31)


def evaluate(
    agent: Agent,
    real: Callable[[], Sandbox],
    tasks: list[Task],
    episodes: int,
    max_steps: int,
    seed: int,
    progress: Callable[[Played], None] | None = None,
) -> list[Played]:
    jobs = [(t, eval_seed(t.id, k, seed)) for t in tasks for k in range(episodes)]
    return play_all(agent, real, jobs, max_steps, progress)


def side(played: list[Played]) -> dict:
    """One evaluation's numbers: mean score (undecided = 0), successes, undecided verdicts, episodes."""
    scores = [p.score for p in played]
    return {
        "episodes": len(played),
        "mean_reward": sum(scores) / len(scores) if scores else None,
        "successes": sum(p.reward == 1.0 for p in played),
        "undecided": sum(p.reward is None for p in played),
        "errors": sum(p.status == "error" for p in played),
        "valid_actions": sum(a != "invalid" for p in played for a in p.actions),
        "actions": sum(len(p.actions) for p in played),
        "by_task": {
            t: sum(p.score for p in played if p.task_id == t) / sum(p.task_id == t for p in played)
            for t in dict.fromkeys(p.task_id for p in played)
        },
    }


def difference(before: list[Played], after: list[Played]) -> dict:
    """After minus before in real reward, paired by (task, seed), clustered by task."""
    key = lambda p: (p.task_id, p.seed)  # noqa: E731 - the pairing key, named once for both sides
    return paired_difference({key(p): p.score for p in after}, {key(p): p.score for p in before}).as_dict()

"""Real replays of recorded trajectories: the raw material of the noise floor (noise_floor.py).

Each replay runs in its own fresh sandbox, built by the domain's spec (sandboxes.domains) from the
recording's own environment (for the terminal: backend, image, limits, screen size; for the web: the
same embedded sites), so that what differs between the recording and a replay is volatility and not a
different machine. A failed replay is tried again in another fresh sandbox, up to `attempts` times,
and every try is counted. Finished replays are appended to a JSONL store: a rerun, or a run resumed
after a kill, replays only what is missing or failed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from sandboxes.base import InvalidActionError, Sandbox
from sandboxes.domains import KNOWN_DOMAINS, REPLAY_BACKEND, domain_spec
from schemas.invalid_actions import INVALID, invalid_action_error, invalid_action_observation
from schemas.records import Action, Environment, Task, Trajectory

log = logging.getLogger(__name__)

REPLAYABLE_DOMAINS = KNOWN_DOMAINS


@dataclass
class Replay:
    trajectory_id: str
    replay: int
    observations: list[str]  # one per replayed turn; shorter than asked when `error` stopped it
    error: str = ""
    attempts: int = 1  # fresh sandboxes used; more than one when earlier tries failed

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def replay_step(sandbox: Sandbox, action: Action) -> str:
    """One recorded action's observation text in `sandbox`, as the fleet runner records it: an
    `INVALID` action (the policy failed) is not run, and an action the sandbox refuses is answered,
    both with `invalid action: <error>` (schemas.invalid_actions), so replays keep going past them."""
    if action.kind == INVALID:
        return invalid_action_observation(invalid_action_error(action)).text
    try:
        return sandbox.step(action).observation.text
    except InvalidActionError as exc:
        return invalid_action_observation(str(exc)).text


def replay_actions(sandbox: Sandbox, task: Task, actions: Sequence[Action]) -> tuple[list[str], str]:
    """Run `actions` after a reset to `task`: the observation texts, and an error that cut it short."""
    observations: list[str] = []
    try:
        sandbox.start()
        sandbox.reset(task)
        for action in actions:
            observations.append(replay_step(sandbox, action))
    except Exception as exc:  # a crash or a broken backend ends this try, not the run
        return observations, f"{type(exc).__name__}: {exc}"
    return observations, ""


def replay_environment(trajectory: Trajectory, backend: str = "auto") -> Environment:
    """The recorded environment, with the backend override where one is given."""
    env = trajectory.environment
    if backend == "auto":
        return env
    return dataclasses.replace(env, config={**env.config, REPLAY_BACKEND: backend})


class ReplayStore:
    """Finished replays as JSONL lines, so a rerun (or a resumed, killed run) does not replay again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.done: dict[tuple[str, int], Replay] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                    replay = Replay(**row)
                except (ValueError, TypeError):
                    continue  # a line torn by a kill is replayed again
                self.done[(replay.trajectory_id, replay.replay)] = replay

    def add(self, replay: Replay) -> None:
        with self._lock:
            self.done[(replay.trajectory_id, replay.replay)] = replay
            with self.path.open("a") as f:
                f.write(json.dumps(replay.as_dict()) + "\n")


def replay_once(
    trajectory: Trajectory, index: int, environment: Environment, turns: int | None, attempts: int
) -> Replay:
    """One replay of `trajectory`, each try in a new sandbox (the domain's replay_sandbox of
    `environment`) that is closed before the next."""
    actions = [s.action for s in trajectory.steps[:turns]]
    try:
        spec = domain_spec(trajectory.domain)
    except (ValueError, ImportError) as exc:  # no such domain, or its optional dependencies are missing
        return Replay(trajectory.trajectory_id, index, [], f"{type(exc).__name__}: {exc}", 1)
    observations: list[str] = []
    error = ""
    for attempt in range(1, attempts + 1):
        try:
            sandbox = spec.replay_sandbox(environment)
        except Exception as exc:  # a config the sandbox refuses: no sandbox to retry with
            return Replay(trajectory.trajectory_id, index, [], f"{type(exc).__name__}: {exc}", attempt)
        try:
            observations, error = replay_actions(sandbox, trajectory.task, actions)
        finally:
            sandbox.close()
        if not error:
            return Replay(trajectory.trajectory_id, index, observations, "", attempt)
        log.warning("replay %s/%d try %d failed: %s", trajectory.trajectory_id, index, attempt, error)
    return Replay(trajectory.trajectory_id, index, observations, error, attempts)


def run_replays(
    trajectories: Sequence[Trajectory],
    replays: int,
    store: ReplayStore,
    *,
    backend: str = "auto",
    max_turns: int | None = None,
    workers: int = 2,
    attempts: int = 3,
    progress: bool = True,
) -> dict[str, list[Replay]]:
    """Replay each trajectory `replays` times; the replays (failed ones included) per trajectory id.
    `backend` overrides where terminal replays run ("auto": each recording's own backend)."""
    jobs = [
        (t, r)
        for t in trajectories
        if t.domain in REPLAYABLE_DOMAINS
        for r in range(replays)
        if (t.trajectory_id, r) not in store.done or store.done[(t.trajectory_id, r)].error
    ]
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="replay") as pool:
        futures = [
            pool.submit(replay_once, t, r, replay_environment(t, backend), max_turns, attempts)
            for t, r in jobs
        ]
        for future in tqdm(
            as_completed(futures), total=len(futures), desc="real replays", disable=not progress
        ):
            store.add(future.result())
    wanted = {t.trajectory_id for t in trajectories}
    found: dict[str, list[Replay]] = {}
    for (tid, r), replay in sorted(store.done.items()):
        if tid in wanted and r < replays:
            found.setdefault(tid, []).append(replay)
    return found


def replay_counts(replays: dict[str, list[Replay]]) -> dict:
    """How the replays went: asked, finished, failed after every try, and the extra tries used."""
    runs = [r for rs in replays.values() for r in rs]
    failed = [r for r in runs if r.error]
    return {
        "replays": len(runs),
        "finished": len(runs) - len(failed),
        "failed": len(failed),
        "retries": sum(r.attempts - 1 for r in runs),
        "errors": [f"{r.trajectory_id}/{r.replay}: {r.error}" for r in failed][:20],
    }

"""WM2Real: the actions a policy chose inside the simulator, replayed in a fresh REAL sandbox and judged by
the real verifier (the third of Word2World's sim-to-real measures).

A simulated episode's success says the world model believed the task was done; WM2Real asks whether
those same actions do the task for real. Each replay runs in a new sandbox built by the domain's spec
(sandboxes.domains `replay_sandbox`) from the paired REAL episode's environment, so the replay runs
where the real run ran, and is played through sandboxes.episode.Episode with the real episode's task,
so bounds, invalid actions and the verifier behave exactly as in a collector run. A try that fails for
the sandbox's sake (a start, reset or step error) is tried again in another fresh sandbox; a verifier
that could not decide leaves the reward None, as it does in a collection.

Finished replays are kept in a JSONL store keyed by what determines them (domain, environment, task,
actions), so a rerun of the report replays only what is missing or failed, and reads the same results.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes.domains import domain_spec
from sandboxes.episode import Episode
from schemas.records import Action, Environment, Task, Trajectory

log = logging.getLogger(__name__)

ATTEMPTS = 2


@dataclass
class Wm2Real:
    reward: float | None  # the real verifier's; None when it could not decide or the replay failed
    status: str  # the replay episode's outcome status ("error" when every try failed)
    steps: int  # actions the real sandbox took
    verifier: str = ""
    error: str = ""  # why there is no reward
    attempts: int = 1
    # the real observation of each replayed action: the same actions as the real episode's while the two
    # agree, so those turns are a second real run of them (single-step accuracy's volatile spans)
    observations: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def replay_key(real: Trajectory, actions: Sequence[Action]) -> str:
    """What determines a replay: the domain, the real environment, the task and the actions."""
    what = [real.domain, dataclasses.asdict(real.environment), dataclasses.asdict(real.task)]
    what.append([[a.kind, a.arguments, a.text] for a in actions])
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


def _play(environment: Environment, domain: str, task: Task, actions: Sequence[Action]) -> Wm2Real:
    """One try in one fresh sandbox, closed before returning."""
    sandbox = domain_spec(domain).replay_sandbox(environment)
    try:
        sandbox.start()
        # one step more than the actions, so the replay ends as the agent's episode did: by its own end
        episode = Episode(sandbox, task, len(actions) + 1)
        episode.reset()
        for action in actions:
            if episode.over:  # the sandbox said done, or the task's own bound came first
                break
            episode.step(action)
        if not episode.over:
            episode.end()
        outcome = episode.outcome
        observations = [s.observation.text for s in episode.steps]
        if outcome.status == "error":
            return Wm2Real(None, "error", len(episode.steps), error=outcome.error, observations=observations)
        verification = episode.verify()
    finally:
        sandbox.close()
    if verification is None:
        return Wm2Real(
            None,
            outcome.status,
            len(observations),
            error="the task has no verifier",
            observations=observations,
        )
    return Wm2Real(
        verification.reward,
        outcome.status,
        len(observations),
        verifier=verification.verifier,
        error=verification.error if verification.reward is None else "",
        observations=observations,
    )


def replay_and_verify(real: Trajectory, actions: Sequence[Action], attempts: int = ATTEMPTS) -> Wm2Real:
    """`actions` (a simulated episode's) in a fresh sandbox like `real`'s, on `real`'s task, verified."""
    result = Wm2Real(None, "error", 0, error="not tried")
    for attempt in range(1, attempts + 1):
        try:
            result = _play(real.environment, real.domain, real.task, actions)
        except Exception as exc:  # a sandbox that would not start or reset: another fresh one
            result = Wm2Real(None, "error", 0, error=f"{type(exc).__name__}: {exc}")
        result.attempts = attempt
        if result.status != "error":
            return result
        log.warning("WM2Real replay of task %s, try %d failed: %s", real.task.id, attempt, result.error)
    return result


class Wm2RealStore:
    """Finished replays as JSONL lines ({"key", "result"}); failed ones are replayed again."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.done: dict[str, Wm2Real] = {}
        if path is not None and path.exists():
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                    self.done[row["key"]] = Wm2Real(**row["result"])
                except (ValueError, TypeError, KeyError):
                    continue  # a line torn by a kill is replayed again

    def add(self, key: str, result: Wm2Real) -> None:
        with self._lock:
            self.done[key] = result
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a") as f:
                    f.write(json.dumps({"key": key, "result": result.as_dict()}) + "\n")


def run_wm2real(
    pairs: Sequence[tuple[Trajectory, Trajectory]], store: Wm2RealStore, workers: int = 1
) -> dict[str, Wm2Real]:
    """{simulated trajectory id: its WM2Real replay} for each (real, simulated) pair."""
    keys = {sim.trajectory_id: replay_key(real, [s.action for s in sim.steps]) for real, sim in pairs}
    todo = {}
    for real, sim in pairs:
        key = keys[sim.trajectory_id]
        known = store.done.get(key)
        if (known is None or known.status == "error") and key not in todo:
            todo[key] = (real, [s.action for s in sim.steps])

    def one(key: str) -> None:
        real, actions = todo[key]
        store.add(key, replay_and_verify(real, actions))

    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="wm2real") as pool:
        list(pool.map(one, todo))
    return {tid: store.done[key] for tid, key in keys.items()}

"""The one fleet runner every domain uses: N sandboxes, M episodes, one writer.

Episode slots 0..M-1 run task `tasks[slot % len(tasks)]`; each slot's trajectory id is derived
from (domain, seed, slot, task id), so a rerun with the same arguments skips what an earlier run
committed and redoes only the rest: after any interruption, each slot is recorded exactly once.
With a `Shard` (`--shard i/n`) a run takes only the slots `slot % n == i`, so n runs with the same
arguments split the plan between them without overlap.

One run per dataset root: `run_fleet` holds a `DatasetLock` on `out` for the whole run (or uses the
caller's), so a second collector on the same root is refused before it touches anything, and the
leftovers of killed writers are removed only under that lock.

Each episode is a `sandboxes.episode.Episode`: its bounds, its accounting of invalid actions (each
one a step), latency and failures, and its verifier are those of the OpenEnv server and the
Gymnasium wrapper, which step the same class.

Workers are threads, one sandbox each: sandboxes wait on I/O (tmux, docker, browsers), and
threads keep the collector's memory flat as N grows. After any episode that ended in an error
(reset, step, policy) or left its sandbox dead, the sandbox is closed and a fresh one started for
the next episode. A policy or sandbox factory that raises stops the run with exit code 1 and the
reason in the summary.

With a fallback (`FleetConfig.fallback`, the CLI's --fallback-simulator), a step the sandbox raises
a SandboxError on does not end the episode: a simulated sandbox takes it over (`Sandbox.resume` with
the task, the initial observation and the real steps), the failed action is retried there and the
same policy goes on to the end; those steps carry info["simulated"], the environment's config a
`fallback` record (model, endpoint, from_step, reason), provenance.simulated is set, and the task
reward is the simulated sandbox's verify. Without one, the episode ends with outcome "error".

SIGINT/SIGTERM stop the run: workers finish their current step (forced after `abort_grace_s` by
closing their sandboxes, which is safe at any moment, during a reset too), in-flight episodes with
at least one step are written with outcome "aborted", episodes stopped before their first step go
back to pending, shards are committed, and the exit code is 130/143. Aborted trajectories count as
finished: a rerun keeps them (the data is real and marked) instead of recording the slot twice.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import random
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from tqdm import tqdm

from collectors.metrics import FleetStats, FleetSummary, write_summary
from collectors.policies.base import Policy
from collectors.supervisor import EXIT_CODES, StopRequest, install_signal_handlers
from collectors.tasks import Shard, TaskSpec
from sandboxes.base import Sandbox, SandboxError
from sandboxes.containment import reap_tmpdirs
from sandboxes.episode import Episode, error_kind
from schemas import StorageError, TrajectoryWriter, ValidationError, cleanup_temporaries, finished_ids
from schemas.lock import DatasetLock
from schemas.records import (
    Action,
    Environment,
    Observation,
    Outcome,
    Provenance,
    Task,
    Trajectory,
)
from schemas.records import Policy as PolicyRecord

log = logging.getLogger(__name__)


@dataclass
class FleetConfig:
    domain: str
    sandbox_factory: Callable[[], Sandbox]
    policy_factory: Callable[[], Policy]
    tasks: list[TaskSpec]
    out: str
    sandboxes: int = 1
    episodes: int = 1
    max_steps: int = 20  # an upper bound; a task's own max_steps may lower it
    seed: int = 0
    collector: str = "collectors"
    collector_version: str = "0.1.0"
    progress: bool = True
    shard_rows: int = 256
    flush_interval_s: float = 30.0  # commit buffered trajectories at least this often
    abort_grace_s: float = 5.0  # after a signal, how long a step may finish before its sandbox is closed
    handle_signals: bool = True  # only possible from the main thread
    writer_options: dict = field(default_factory=dict)
    shard: Shard | None = None  # run only this shard's slots (`out` is then the shard's own sub-root)
    # The whole dataset `out` belongs to (a shard's parent): resume skips what any shard finished,
    # and attachments go there, where readers of the union resolve them.
    dataset_root: str = ""
    # --fallback-simulator: when a real sandbox fails mid-episode, a simulated sandbox from this
    # factory takes the episode over (Sandbox.resume) and the policy goes on there; each trajectory
    # that fell back records `fallback` (its model and endpoint, plus where and why) in its config.
    fallback: Callable[[], Sandbox] | None = None
    fallback_record: dict = field(default_factory=dict)


def trajectory_id(domain: str, seed: int, slot: int, task_id: str) -> str:
    digest = hashlib.sha256(f"{domain}\x00{seed}\x00{slot}\x00{task_id}".encode()).hexdigest()[:12]
    return f"{domain}-s{seed}-{slot:06d}-{digest}"


def now() -> datetime:
    return datetime.now(UTC)


def _handover(task: Task, environment: Environment) -> Task:
    """The task as a simulator taking over is given it: with the real sandbox's tool definitions (an
    MCP server's), which its prompt lists, unless the task names its own."""
    if not environment.tools or "tools" in task.metadata:
        return task
    return replace(task, metadata={**task.metadata, "tools": copy.deepcopy(environment.tools)})


def _policy_error(what: str, exc: Exception) -> Outcome:
    return Outcome("error", f"{what}: {type(exc).__name__}: {exc}", "policy_error")


def _close_quietly(sandbox: Sandbox) -> None:
    try:
        sandbox.close()
    except Exception as exc:
        log.warning("closing a sandbox failed: %s", exc)


class Fleet:
    def __init__(
        self,
        config: FleetConfig,
        writer: TrajectoryWriter,
        slots: list[int],
        request: StopRequest,
        lock: DatasetLock,
    ) -> None:
        self.config = config
        self.writer = writer
        self.lock = lock
        self.stats = FleetStats()
        self.request = request
        self.stop = request.event
        self.fatal: str | None = None
        self._slots = list(slots)
        self._lock = threading.Lock()
        self._sandboxes: dict[int, Sandbox] = {}
        self.done = 0

    @property
    def signal_name(self) -> str | None:
        return self.request.signal_name

    # -- work distribution -----------------------------------------------------------------------

    def _take(self) -> int | None:
        with self._lock:
            return self._slots.pop(0) if self._slots and not self.stop.is_set() else None

    def _give_back(self, slot: int) -> None:
        with self._lock:
            self._slots.insert(0, slot)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._slots)

    def fail(self, message: str) -> None:
        with self._lock:
            self.fatal = self.fatal or message
        self.stop.set()

    # -- workers ---------------------------------------------------------------------------------

    def worker(self, wid: int) -> None:
        sandbox: Sandbox | None = None
        try:
            policy = self.config.policy_factory()
            while (slot := self._take()) is not None:
                if sandbox is None:
                    sandbox = self._start_sandbox(wid)
                    if sandbox is None:
                        self._give_back(slot)
                        return
                trajectory, reset_s, healthy = self.episode(sandbox, policy, slot)
                if not healthy or not sandbox.alive:
                    self._close(wid, sandbox)
                    sandbox = None
                    if not self.stop.is_set():
                        self.stats.replaced_sandbox()
                if trajectory is None:  # stopped before its first step: the slot stays pending
                    self._give_back(slot)
                    return
                try:
                    self.writer.write(trajectory)
                except ValidationError as exc:
                    # Our own bug, not the environment's: keep the run going, leave the slot to a rerun.
                    log.error("slot %d not written: %s", slot, exc)
                    self.stats.unwritable_trajectory()
                    continue
                except StorageError as exc:
                    self.fail(str(exc))
                    return
                self.stats.record(trajectory, reset_s)
                with self._lock:
                    self.done += 1
        # A policy that cannot be built, a bug in the runner: stop, keep what is written.
        except Exception as exc:
            log.exception("worker %d failed", wid)
            self.fail(f"worker {wid}: {type(exc).__name__}: {exc}")
        finally:
            if sandbox is not None:
                self._close(wid, sandbox)

    def _start_sandbox(self, wid: int) -> Sandbox | None:
        error: Exception | None = None
        for _attempt in range(2):
            # Made and registered under the lock that force_close_sandboxes takes, after a last
            # look at `stop`: a sandbox is either refused or visible to the forced close.
            with self._lock:
                if self.stop.is_set():
                    return None
                sandbox = self.config.sandbox_factory()
                self._sandboxes[wid] = sandbox
            try:
                sandbox.start()
                return sandbox
            except Exception as exc:
                error = exc
                self._close(wid, sandbox)
        if not self.stop.is_set():
            self.fail(f"sandbox failed to start twice: {type(error).__name__}: {error}")
        return None

    def _close(self, wid: int, sandbox: Sandbox) -> None:
        with self._lock:
            if self._sandboxes.get(wid) is sandbox:
                del self._sandboxes[wid]
        _close_quietly(sandbox)

    def force_close_sandboxes(self) -> None:
        """Unblock steps still running after the grace period; their episodes end as aborted."""
        with self._lock:
            sandboxes = list(self._sandboxes.values())
        for sandbox in sandboxes:
            _close_quietly(sandbox)

    # -- one episode -----------------------------------------------------------------------------

    def episode(
        self, sandbox: Sandbox, policy: Policy, slot: int
    ) -> tuple[Trajectory | None, float | None, bool]:
        """(trajectory, reset seconds, sandbox still clean). No trajectory when the run was stopped
        before the episode's first step: nothing was observed that a rerun would not redo."""
        config = self.config
        if self.stop.is_set():
            return None, None, True
        task = copy.deepcopy(config.tasks[slot % len(config.tasks)].task)
        task.metadata.update(episode=slot // len(config.tasks), slot=slot)
        episode = Episode(sandbox, task, config.max_steps)
        started_at = now()
        try:
            initial = episode.reset()
        except Exception as exc:
            episode.end(self._failure(exc, "reset failed"))
            error = {"error_kind": episode.outcome.error_kind}
            initial = Observation(format="error", text=f"reset failed: {exc}", data=error)
        try:  # after the reset: what a sandbox offers (an MCP server's tools) may depend on the task
            environment = sandbox.describe()
        except Exception:
            environment = Environment(name=config.domain, backend="unknown")
        simulator: Sandbox | None = None
        if not episode.over:
            try:
                policy.reset(task, initial, random.Random(f"{config.seed}:{slot}"))
            except Exception as exc:
                episode.end(_policy_error("policy reset failed", exc))
            else:
                self._play(episode, policy, initial)
            # A sandbox's own failure, with a fallback configured, while the run goes on (a step that
            # failed because a signal closed the sandbox ends as aborted instead).
            failed = episode.failure.exc if episode.failure is not None else None
            if config.fallback is not None and isinstance(failed, SandboxError) and not self.stop.is_set():
                simulator, record = self._fall_back(episode, _handover(task, environment), policy)
                if record is not None:
                    environment.config = {**environment.config, "fallback": record}
            elif episode.failure is not None and self.stop.is_set():
                episode.outcome = self._failure(episode.failure.exc, f"step {episode.failure.index} failed")
        outcome = episode.outcome
        assert outcome is not None
        if outcome.status in ("completed", "truncated"):
            episode.verify()  # after a fallback, of the simulator's end state: it says what it can
        if simulator is not None:
            _close_quietly(simulator)
        # An error broke the episode off somewhere unknown: do not trust the sandbox again.
        healthy = episode.healthy and outcome.status != "error"
        if outcome.status == "aborted" and not episode.steps:
            return None, episode.reset_s, healthy
        trajectory = Trajectory(
            trajectory_id=trajectory_id(config.domain, config.seed, slot, task.id),
            domain=config.domain,
            environment=environment,
            task=task,
            policy=PolicyRecord(name=policy.name, config=policy.config()),
            initial_observation=initial,
            steps=episode.steps,
            outcome=outcome,
            provenance=Provenance(
                collector=config.collector,
                collector_version=config.collector_version,
                host=socket.gethostname(),
                started_at=started_at,
                finished_at=now(),
                # A world model stands in for the environment, for all of the episode or (after a
                # fallback) its end: keep synthetic data distinguishable.
                simulated=environment.backend == "simulator" or "fallback" in environment.config,
            ),
        )
        return trajectory, episode.reset_s, healthy

    def _play(
        self, episode: Episode, policy: Policy, observation: Observation, first: Action | None = None
    ) -> None:
        """Ask the policy and step until the episode ends; `first`, when given, is the action to take
        before asking the policy again (the one a failed sandbox did not finish)."""
        action = first
        while not episode.over:
            if self.stop.is_set():
                episode.end(Outcome("aborted", f"stopped by {self.signal_name or 'the runner'}"))
                continue
            try:
                action = action or policy.act(observation)
            except Exception as exc:
                episode.end(_policy_error("policy failed", exc))
                continue
            if action is None:  # the policy is done
                episode.end()
                continue
            step = episode.step(action)
            observation, action = (step.observation if step is not None else observation), None

    def _fall_back(self, episode: Episode, task: Task, policy: Policy) -> tuple[Sandbox | None, dict | None]:
        """Go on with the episode on a simulated sandbox given the real steps so far, retrying the
        failed action there first: (the simulated sandbox to close, the `fallback` record), or
        (None, None), the episode's error outcome kept, when no simulator can take over."""
        assert self.config.fallback is not None and episode.failure is not None
        assert episode.outcome is not None
        from_step, failed = episode.failure.index, episode.failure.exc
        reason = f"step {from_step} failed: {type(failed).__name__}: {failed}"
        simulator: Sandbox | None = None
        try:
            simulator = self.config.fallback()
            simulator.start()
            action = episode.hand_over(simulator, task, {"simulated": True})
        except Exception as exc:
            if simulator is not None:
                _close_quietly(simulator)
            episode.outcome.error = (
                f"{episode.outcome.error}; the fallback simulator could not take over: {exc}"
            )
            return None, None
        log.warning("task %s: %s; the episode goes on on the simulator", task.id, reason)
        last = episode.steps[-1].observation if episode.steps else episode.initial
        assert last is not None
        self._play(episode, policy, last, first=action)
        if episode.failure is not None:
            episode.outcome = self._failure(
                episode.failure.exc, f"step {episode.failure.index} failed on the fallback simulator"
            )
        record = {**self.config.fallback_record, "from_step": from_step, "reason": reason}
        return simulator, record

    def supervise(self, workers: int, total: int) -> None:
        """Start the workers, show progress, flush shards periodically, enforce the abort grace."""
        config = self.config
        threads = [
            threading.Thread(target=self.worker, args=(wid,), name=f"fleet-worker-{wid}", daemon=True)
            for wid in range(workers)
        ]
        for thread in threads:
            thread.start()
        bar = tqdm(total=total, desc=config.domain, unit="ep", file=sys.stderr, disable=not config.progress)
        last_flush = time.monotonic()
        stop_seen: float | None = None
        forced = False
        try:
            while any(thread.is_alive() for thread in threads):
                try:
                    time.sleep(0.2)
                except KeyboardInterrupt:  # signal handlers not installed (not the main thread's choice)
                    self.request.signal_name = self.request.signal_name or "SIGINT"
                    self.stop.set()
                bar.set_postfix(steps=self.stats.steps, errors=sum(self.stats.errors.values()), refresh=False)
                bar.update(self.done - bar.n)
                clock = time.monotonic()
                if clock - last_flush >= config.flush_interval_s:
                    last_flush = clock
                    try:
                        self.lock.check()
                        self.writer.flush()
                    except StorageError as exc:
                        self.fail(str(exc))
                if self.stop.is_set():
                    stop_seen = stop_seen or clock
                    if not forced and clock - stop_seen >= config.abort_grace_s:
                        forced = True
                        self.force_close_sandboxes()
                    elif forced and clock - stop_seen >= config.abort_grace_s + 30:
                        log.error("workers did not stop 30 s after their sandboxes were closed; giving up")
                        break
        finally:
            bar.update(self.done - bar.n)
            bar.close()

    def _failure(self, exc: BaseException, what: str) -> Outcome:
        if self.stop.is_set():
            return Outcome("aborted", f"stopped by {self.signal_name or 'the runner'} ({what}: {exc})")
        return Outcome("error", f"{what}: {type(exc).__name__}: {exc}", error_kind(exc))


def run_fleet(config: FleetConfig, lock: DatasetLock | None = None) -> FleetSummary:
    """Run the fleet to the end (or a signal) and return the summary, also saved as summary.json.

    Holds `lock` (the caller's, already acquired) or its own DatasetLock on `config.out` for the
    whole run. Raises StorageError before any sandbox starts when `config.out` is not writable,
    and DatasetLockedError (a StorageError) when another run holds it.
    """
    if not config.tasks:
        raise ValueError("no tasks to run")
    if config.sandboxes < 1 or config.episodes < 0 or config.max_steps < 1:
        raise ValueError("need sandboxes >= 1, episodes >= 0 and max_steps >= 1")
    request = StopRequest()
    previous = install_signal_handlers(request) if config.handle_signals else {}
    own_lock = lock is None
    try:
        if lock is None:
            lock = DatasetLock(config.out).acquire()
        elif not lock.held or lock.root != config.out:
            raise StorageError(f"run_fleet needs the acquired lock of {config.out}")
        return _run(config, lock, request)
    finally:
        if own_lock and lock is not None:
            lock.release()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _run(config: FleetConfig, lock: DatasetLock, request: StopRequest) -> FleetSummary:
    removed = cleanup_temporaries(lock)
    if removed:
        log.info("removed %d temporary files left by an interrupted run", removed)
    removed = reap_tmpdirs()
    if removed:
        log.info("removed %d sandbox temp dirs of collectors that died before closing them", removed)
    parent = config.dataset_root if config.dataset_root not in ("", config.out) else None
    writer = TrajectoryWriter(
        config.out, max_rows_per_shard=config.shard_rows, attachments_root=parent, **config.writer_options
    )
    finished = finished_ids(parent or config.out)
    owned = config.shard.slots(config.episodes) if config.shard else list(range(config.episodes))
    slots = [
        slot
        for slot in owned
        if trajectory_id(config.domain, config.seed, slot, config.tasks[slot % len(config.tasks)].id)
        not in finished
    ]
    fleet = Fleet(config, writer, slots, request, lock)
    started = time.monotonic()
    try:
        fleet.supervise(min(config.sandboxes, len(slots)), len(slots))
    finally:
        try:
            writer.close()
        except StorageError as exc:
            fleet.fatal = fleet.fatal or str(exc)
    summary = fleet.stats.summary(
        config.out,
        skipped=len(owned) - len(slots),
        pending=fleet.pending,
        wall_s=time.monotonic() - started,
    )
    if config.fallback is not None:
        summary.fallbacks = fleet.stats.fallbacks
    summary.interrupted_by = fleet.signal_name
    summary.fatal = fleet.fatal
    summary.exit_code = EXIT_CODES.get(fleet.signal_name or "", 1 if fleet.fatal else 0)
    try:
        write_summary(config.out, summary)
    except Exception as exc:  # the trajectories are committed; a missing summary must not hide that
        log.error("could not write summary.json: %s", exc)
    return summary

"""The session table of a served sandbox: leases and one limit around openenv-core's public server.

openenv's `HTTPEnvServer` serves the WebSocket protocol (`/ws`) and `/health` from an app of its own;
the served app exposes only those two of its routes, so a route a later openenv adds is not served
unless listed here. Everything below uses openenv's public classes only: a `/ws` connection passes
through `LeasedSockets` (sandboxes/serve/sockets.py) before openenv's handler sees it, and openenv
builds its environment through `SessionPool.ws_environment`, the factory it is given. HTTP sessions
(/sessions) are this table's own. What the table adds:

- one limit for WebSocket and HTTP sessions together, and a refusal that says it and what to do;
- a lease per session: every call renews it, a session idle past it is reclaimed (its sandbox
  closed), a session busy in a long step is not; later calls are told it expired;
- a WebSocket session whose client leaves (or says close) while a reset or step runs: its sandbox is
  closed from here, which ends the call, and its slot is freed at once;
- why each session ended (expired, closed by its client, its connection dropped, server shutdown),
  remembered for the HTTP routes and counted for the shutdown summary;
- episode counts and the mean task reward.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from openenv.core.env_server import EnvironmentFactoryError, SessionCapacityError

from sandboxes.base import Sandbox
from sandboxes.serve.connection import Connection
from sandboxes.serve.environment import EpisodeStateError, SandboxEnvironment
from sandboxes.serve.models import SandboxAction, SandboxObservation
from schemas.records import Task

log = logging.getLogger(__name__)

# Why a session ended.
EXPIRED = "expired"  # idle past its lease: the reaper reclaimed it
CLOSED = "closed"  # its client closed it (DELETE, or openenv's close message before the socket closed)
DISCONNECTED = "disconnected"  # its WebSocket dropped without a close message (client killed, network)
SHUTDOWN = "shutdown"  # the server stopped
RECLAIMED = frozenset({EXPIRED, SHUTDOWN})  # ended by the server: a later call is told why
REMEMBERED_ENDINGS = 10_000  # ended HTTP session ids kept to answer 410 / "was closed" instead of 404


class SessionEndedError(EpisodeStateError):
    """A call on a session the server has already reclaimed."""


class ServeStats:
    """Counters for the shutdown summary; sessions run in many threads, hence the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts = dict.fromkeys(("opened", "refused", EXPIRED, DISCONNECTED, CLOSED, SHUTDOWN), 0)
        self.episodes = 0
        self.rewards: list[float] = []

    def count(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1

    def episode(self, reward: float | None) -> None:
        with self._lock:
            self.episodes += 1
            if reward is not None:
                self.rewards.append(float(reward))

    def summary(self) -> str:
        with self._lock:
            c = self.counts
            mean = f"{sum(self.rewards) / len(self.rewards):.3f}" if self.rewards else "n/a"
            return (
                f"sessions opened {c['opened']}, refused {c['refused']}, reclaimed idle {c[EXPIRED]}, "
                f"reclaimed on disconnect {c[DISCONNECTED]}, closed by clients {c[CLOSED]}, "
                f"closed at shutdown {c[SHUTDOWN]}; episodes ended {self.episodes}, "
                f"mean reward {mean} over {len(self.rewards)} with a reward"
            )


class ServedEnvironment(SandboxEnvironment):
    """A SandboxEnvironment that counts its episodes and, once the server has reclaimed its
    session, says why on every later call."""

    def __init__(
        self,
        sandbox_factory: Callable[[], Sandbox],
        tasks: Sequence[Task],
        *,
        domain: str,
        max_steps: int = 20,
        stats: ServeStats | None = None,
    ) -> None:
        super().__init__(sandbox_factory, tasks, domain=domain, max_steps=max_steps)
        self.stats = stats if stats is not None else ServeStats()
        self.ended: str | None = None  # set by the pool when it reclaims the session

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None, **kw: Any
    ) -> SandboxObservation:
        self._check_ended()
        return super().reset(seed=seed, episode_id=episode_id, task_id=task_id, **kw)

    def step(self, action: SandboxAction, timeout_s: float | None = None, **kw: Any) -> SandboxObservation:
        self._check_ended()
        observation = super().step(action, timeout_s, **kw)
        if observation.done:
            self.stats.episode(observation.reward)
        return observation

    def resources(self) -> list[str]:
        """What this session's sandbox holds now ("pid:", "container:", "path:" strings)."""
        sandbox = self._sandbox
        return list(sandbox.resources()) if sandbox is not None else []

    def _check_ended(self) -> None:
        if self.ended is not None:
            raise SessionEndedError(self.ended)


@dataclasses.dataclass(eq=False)
class Lease:
    """One session: a WebSocket's (`connection` set; openenv runs its calls) or an HTTP one (its own
    one-thread `executor`, where its environment was made and its calls run, as Playwright needs)."""

    id: str
    connection: Connection | None = None
    executor: ThreadPoolExecutor | None = None
    env: ServedEnvironment | None = None
    busy: int = 0  # calls in flight: a busy session is never reclaimed
    last_call: float = dataclasses.field(default_factory=time.monotonic)
    ended: str | None = None  # why, once it ended
    message: str = ""  # what a later call is told
    # Resolved when the server reclaims the session: an idle WebSocket handler stops waiting.
    reclaimed: asyncio.Future[None] | None = None

    def touch(self) -> None:
        self.last_call = time.monotonic()


class SessionPool:
    """The leases of a served sandbox's sessions; see the module docstring."""

    def __init__(
        self,
        env_factory: Callable[[], ServedEnvironment],
        *,
        max_sessions: int,
        idle_timeout_s: float | None,
        stats: ServeStats,
    ) -> None:
        self.env_factory = env_factory
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.stats = stats
        self.stopping = False  # set when shutdown starts: sessions ending now end by SHUTDOWN
        self.leases: dict[str, Lease] = {}
        self.calls_in_flight = 0  # resets and steps (WebSocket: messages being answered) running now
        self.background: set[asyncio.Future] = set()  # abandoned sessions: sandboxes closing, last answers
        self.endings: OrderedDict[str, tuple[str, str]] = OrderedDict()  # HTTP session -> (why, message)
        self.reaper: asyncio.Task | None = None

    # -- messages ----------------------------------------------------------------------------------

    def lease_text(self) -> str:
        if self.idle_timeout_s is None:
            return "sessions on this server never expire"
        return f"a session is reclaimed after {self.idle_timeout_s:g} s without a call"

    def capacity_message(self) -> str:
        return (
            f"the server is at its limit of {self.max_sessions} concurrent sessions ({self.active_sessions} "
            "open; WebSocket and HTTP sessions count together). Close a session you hold (close its "
            "WebSocket, or DELETE /sessions/<id>), retry once an idle one is reclaimed "
            f"({self.lease_text()}), or restart the server with a larger --max-sessions"
        )

    def expired_message(self, idle_s: float) -> str:
        return (
            f"the session expired: no call for {idle_s:.1f} s, past its lease of {self.idle_timeout_s:g} s, "
            "so its sandbox was closed and reclaimed; open a new session (a new WebSocket connection, "
            "or POST /sessions)"
        )

    def ended(self, session_id: str) -> tuple[str, str] | None:
        """(why, message) for an HTTP session that ended, None if it is unknown."""
        return self.endings.get(session_id)

    # -- the table ---------------------------------------------------------------------------------

    @property
    def active_sessions(self) -> int:
        return len(self.leases)

    def reserve(self, connection: Connection | None = None) -> Lease:
        """A new session's lease, or SessionCapacityError (counted) when the server is full."""
        if len(self.leases) >= self.max_sessions:
            self.stats.count("refused")
            raise SessionCapacityError(self.active_sessions, self.max_sessions, self.capacity_message())
        lease = Lease(uuid.uuid4().hex, connection, reclaimed=asyncio.get_running_loop().create_future())
        self.leases[lease.id] = lease
        self.stats.count("opened")
        return lease

    def end(self, lease: Lease, reason: str, message: str = "") -> None:
        """Mark the session ended and count why; its slot is freed by `drop` (at once, or once its
        sandbox is closed). Synchronous: nothing on the event loop sees the table half-changed."""
        if lease.ended is not None:
            return
        lease.ended = reason
        lease.message = message or f"the session was {'closed' if reason == CLOSED else 'ended: ' + reason}"
        self.stats.count(reason)
        if lease.env is not None:
            lease.env.ended = lease.message
        if lease.executor is not None:  # an HTTP session: its routes answer 404 / 410 from this
            self.endings[lease.id] = (reason, lease.message)
            while len(self.endings) > REMEMBERED_ENDINGS:
                self.endings.popitem(last=False)
        if reason in RECLAIMED and lease.reclaimed is not None and not lease.reclaimed.done():
            lease.reclaimed.set_result(None)

    def drop(self, lease: Lease) -> None:
        self.leases.pop(lease.id, None)

    def ended_by_client(self, lease: Lease) -> str:
        """Why a WebSocket session whose handler returned ended."""
        if self.stopping:
            return SHUTDOWN
        return CLOSED if lease.connection is not None and lease.connection.close_requested else DISCONNECTED

    def session_resources(self) -> dict[str, list[str]]:
        """Session id -> what its sandbox holds now; for leak checks."""
        return {sid: lease.env.resources() for sid, lease in list(self.leases.items()) if lease.env}

    # -- releasing sandboxes -----------------------------------------------------------------------

    async def release(self, lease: Lease) -> None:
        """Close the session's sandbox. An HTTP session's closes in its own thread; a WebSocket
        session's is interrupted from here (a sandbox's close() is safe from any thread and kills its
        processes, which ends a call still running), and openenv closes the rest in the session's
        thread when its handler returns."""
        env = lease.env
        if env is None:
            return
        if lease.executor is None:
            try:
                await asyncio.to_thread(env.interrupt)
            except Exception as exc:  # openenv's close in the session's thread tries again
                log.warning("interrupting a session's sandbox: %s", exc)
            return
        try:
            await asyncio.get_running_loop().run_in_executor(lease.executor, env.close)
        except Exception as exc:
            log.warning("closing a session's sandbox: %s", exc)
        finally:
            lease.executor.shutdown(wait=False)

    def later(self, work: Awaitable[Any]) -> None:
        """Run `work` in the background (from a callback); shutdown awaits it."""
        task = asyncio.ensure_future(work)
        self.background.add(task)  # a reference, or the task could be collected mid-way
        task.add_done_callback(self.background.discard)

    async def reclaim(self, lease: Lease, reason: str, message: str = "") -> None:
        """End a session from the server's side: later calls are refused at once, its slot is free
        once its sandbox is closed."""
        self.end(lease, reason, message)
        try:
            await self.release(lease)
        finally:
            self.drop(lease)

    # -- HTTP sessions -----------------------------------------------------------------------------

    async def open_http_session(self) -> str:
        lease = self.reserve()
        lease.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="serve-session")
        try:
            lease.env = await asyncio.get_running_loop().run_in_executor(lease.executor, self.env_factory)
        except Exception as exc:
            self.drop(lease)
            lease.executor.shutdown(wait=False)
            raise EnvironmentFactoryError(getattr(self.env_factory, "__name__", "environment")) from exc
        return lease.id

    def http_env(self, session_id: str) -> ServedEnvironment | None:
        """The environment of a live HTTP session, None when there is none (see `ended`)."""
        lease = self.leases.get(session_id)
        return lease.env if lease is not None and lease.executor is not None and not lease.ended else None

    async def run_in_session(
        self, session_id: str, func: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """Run `func` in the HTTP session's own thread, renewing its lease when the call starts and
        ends; while it runs the session is busy."""
        lease = self.leases.get(session_id)
        if lease is None or lease.executor is None or lease.ended:
            raise SessionEndedError(lease.message if lease else "the session has ended")
        self.call_started(lease)
        try:
            call = functools.partial(func, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(lease.executor, call)
        finally:
            self.call_ended(lease)

    def touch(self, session_id: str) -> None:
        """Renew the session's lease."""
        lease = self.leases.get(session_id)
        if lease is not None:
            lease.touch()

    def call_started(self, lease: Lease) -> None:
        lease.busy += 1
        self.calls_in_flight += 1
        lease.touch()

    def call_ended(self, lease: Lease) -> None:
        lease.busy -= 1
        self.calls_in_flight -= 1
        lease.touch()

    async def close_session(self, session_id: str) -> None:
        lease = self.leases.get(session_id)
        if lease is not None:
            await self.reclaim(lease, CLOSED)

    # -- running ---------------------------------------------------------------------------------

    async def start(self) -> None:
        if self.idle_timeout_s is not None and self.reaper is None:
            self.reaper = asyncio.create_task(self.reap())

    async def close_all(self) -> None:
        """Close every session's sandbox (at shutdown); busy ones first, so that shutdown does not
        wait for a running step (up to its own timeout)."""
        self.stopping = True
        if self.reaper is not None:
            self.reaper.cancel()
        live = sorted(self.leases.values(), key=lambda lease: not lease.busy)
        for lease in live:
            await self.reclaim(lease, SHUTDOWN, "the server shut down")
        if self.background:  # abandoned sessions' sandboxes still closing: before the loop stops
            await asyncio.gather(*self.background, return_exceptions=True)

    async def reap(self) -> None:
        """Reclaim sessions idle past their lease, checking often enough for short leases too."""
        timeout = self.idle_timeout_s
        assert timeout is not None
        interval = min(max(timeout / 4, 0.1), 5.0)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for lease in list(self.leases.values()):
                idle = now - lease.last_call
                if lease.busy or lease.ended or idle <= timeout:
                    continue
                try:
                    await self.reclaim(lease, EXPIRED, self.expired_message(idle))
                except Exception as exc:  # the reaper must outlive one bad close
                    log.warning("idle-session reaper: %s (will retry)", exc)

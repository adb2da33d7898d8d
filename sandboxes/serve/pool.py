"""The session table of a served sandbox: openenv-core's own (HTTPEnvServer's), with leases.

WebSocket sessions (openenv's /ws) and our HTTP sessions (/sessions) live in the one table HTTPEnvServer
keeps, so one capacity covers both and one reaper reclaims both. What this adds to it:

- a refusal that says the limit and what to do, counted;
- a lease per session: every call renews it, a session idle past it is reclaimed (its sandbox closed),
  a session busy in a long step is not; later calls are told it expired, not that it never existed;
- a WebSocket session whose client leaves (or says close) while a reset or step runs: the call is
  interrupted (its sandbox closed from here) and the slot freed at once, not after the step's timeout;
- why each session ended (expired, closed by its client, its connection dropped, server shutdown),
  remembered for the HTTP routes and counted for the shutdown summary;
- episode counts and the mean task reward.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import ConcurrencyConfig

from sandboxes.base import Sandbox
from sandboxes.serve.connection import CURRENT_CONNECTION, Connection, asks_to_close
from sandboxes.serve.environment import EpisodeStateError, SandboxEnvironment
from sandboxes.serve.models import SandboxAction, SandboxObservation
from schemas.records import Task

log = logging.getLogger(__name__)

# Why a session ended.
EXPIRED = "expired"  # idle past its lease: the reaper reclaimed it
CLOSED = "closed"  # its client closed it (DELETE, or openenv's close message before the socket closed)
DISCONNECTED = "disconnected"  # its WebSocket dropped without a close message (client killed, network)
SHUTDOWN = "shutdown"  # the server stopped
# A call that outlasts this starts listening to its WebSocket (for its client leaving); quicker ones
# never pay for a listener. A client that leaves is thus seen within this much of a call's start.
WATCH_AFTER_S = 0.2
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
    session, says why on every later call (a WebSocket outlives its reclaimed session)."""

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


def _log_failure(done: Any) -> None:
    """A done-callback: retrieve a background future's error (asyncio would otherwise report it as
    never retrieved) and log it at debug level: the session it belonged to is gone."""
    if not done.cancelled() and done.exception() is not None:
        log.debug("after its session ended: %r", done.exception())


# -- the pool --------------------------------------------------------------------------------------


class SessionPool(HTTPEnvServer):
    """HTTPEnvServer whose sessions hold leases; see the module docstring."""

    def __init__(
        self,
        env_factory: Callable[[], Environment],
        *,
        max_sessions: int,
        idle_timeout_s: float | None,
        stats: ServeStats,
    ) -> None:
        super().__init__(
            env_factory,
            SandboxAction,
            SandboxObservation,
            concurrency_config=ConcurrencyConfig(
                max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s
            ),
        )
        self.stats = stats
        self.idle_timeout_s = idle_timeout_s
        self.stopping = False  # set when shutdown starts: sessions ending now end by SHUTDOWN
        self.http_sessions: set[str] = set()
        self._connections: dict[str, Connection] = {}
        self._busy: dict[str, int] = {}  # calls in flight per session: never reclaimed mid-step
        self._ended: OrderedDict[str, tuple[str, str]] = OrderedDict()  # HTTP session -> (why, message)
        self._releasing: set[asyncio.Task] = set()  # sandboxes of abandoned sessions being closed

    # -- messages ----------------------------------------------------------------------------------

    def lease_text(self) -> str:
        if self.idle_timeout_s is None:
            return "sessions on this server never expire"
        return f"a session is reclaimed after {self.idle_timeout_s:g} s without a call"

    def capacity_message(self, active: int) -> str:
        return (
            f"the server is at its limit of {self.max_concurrent_envs} concurrent sessions ({active} open; "
            "WebSocket and HTTP sessions count together). Close a session you hold (close its "
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
        return self._ended.get(session_id)

    # -- the table ---------------------------------------------------------------------------------

    async def _create_session(self) -> tuple[str, Environment]:
        try:
            session_id, env = await super()._create_session()
        except SessionCapacityError as exc:
            self.stats.count("refused")
            raise SessionCapacityError(
                exc.active_sessions, exc.max_sessions, self.capacity_message(exc.active_sessions)
            ) from exc
        self.stats.count("opened")
        connection = CURRENT_CONNECTION.get()
        if connection is not None:
            self._connections[session_id] = connection
        return session_id, env

    async def open_http_session(self) -> str:
        session_id, _ = await self._create_session()
        self.http_sessions.add(session_id)
        return session_id

    def http_env(self, session_id: str) -> Environment | None:
        """The environment of a live HTTP session, None when there is none (see `ended`)."""
        if session_id not in self.http_sessions:
            return None
        return self._sessions.get(session_id)

    async def _destroy_session(
        self, session_id: str, reason: str | None = None, message: str = "", idle_over: float | None = None
    ) -> None:
        """Remove a session and close its sandbox (in the session's own thread, as Playwright needs).
        With `idle_over`, only if the session is still idle past it and no call is in flight."""
        async with self._session_lock:
            forgotten = self._forget(session_id, reason, message, idle_over)
        if forgotten is not None:
            await self._cleanup_session_resources(*forgotten)

    async def _release_abandoned(self, env: Environment, executor: Any, stack: Any) -> None:
        """Close an abandoned session's sandbox from here, a call perhaps still running in its thread:
        a sandbox's close() is safe from any thread and kills its processes (a runner aborts the same
        way), which ends the call; the session's own thread then closes what is left, Playwright's
        objects included, once the call has returned. Nobody waits for that."""
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()
        if isinstance(env, ServedEnvironment):
            try:
                await asyncio.to_thread(env.interrupt)
            except Exception as exc:  # the close below, in the session's thread, tries again
                log.warning("interrupting an abandoned session's sandbox: %s", exc)
        if executor is None:
            return
        closed = executor.submit(env.close)
        closed.add_done_callback(_log_failure)
        if executor is not self._shared_session_executor:
            executor.shutdown(wait=False)

    def _forget(
        self, session_id: str, reason: str | None, message: str, idle_over: float | None = None
    ) -> tuple[Environment, Any, Any] | None:
        """Take the session out of the table, count why it ended and tell its environment; its
        (env, executor, exit stack) to clean up, or None if it was gone (or is not idle past
        `idle_over`). Synchronous: nothing else on the event loop sees the table half-changed
        (openenv, too, holds its session lock only around such sections, never across an await)."""
        if session_id not in self._sessions:
            return None
        if idle_over is not None:
            info = self._session_info.get(session_id)
            if self._busy.get(session_id) or (
                info is not None and time.time() - info.last_activity_at <= idle_over
            ):
                return None
        env = self._sessions.pop(session_id)
        executor = self._session_executors.pop(session_id, None)
        stack = self._session_stacks.pop(session_id, None)
        self._session_info.pop(session_id, None)
        connection = self._connections.pop(session_id, None)
        if reason is None:
            if self.stopping:
                reason = SHUTDOWN
            elif connection is not None and not connection.close_requested:
                reason = DISCONNECTED
            else:
                reason = CLOSED
        self.stats.count(reason)
        message = message or f"the session was {'closed' if reason == CLOSED else 'ended: ' + reason}"
        if isinstance(env, ServedEnvironment):
            env.ended = message
        if session_id in self.http_sessions:
            self.http_sessions.discard(session_id)
            self._ended[session_id] = (reason, message)
            while len(self._ended) > REMEMBERED_ENDINGS:
                self._ended.popitem(last=False)
        return env, executor, stack

    async def close_session(self, session_id: str) -> None:
        await self._destroy_session(session_id, CLOSED)

    async def close_all(self) -> None:
        """Close every session's sandbox (at shutdown); a call still running is interrupted first,
        so that shutdown does not wait for its step (up to its own timeout)."""
        self.stopping = True
        busy = [env for sid, env in self._sessions.items() if self._busy.get(sid)]
        for env in busy:
            if isinstance(env, ServedEnvironment):
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(env.interrupt)
        for session_id in list(self._sessions):
            await self._destroy_session(session_id, SHUTDOWN, "the server shut down")
        if self._releasing:  # abandoned sessions' sandboxes still closing: before the loop stops
            await asyncio.gather(*self._releasing, return_exceptions=True)

    @property
    def calls_in_flight(self) -> int:
        """Resets and steps running now, all sessions together."""
        return sum(self._busy.values())

    def session_resources(self) -> dict[str, list[str]]:
        """Session id -> what its sandbox holds now; for leak checks."""
        live = list(self._sessions.items())
        return {sid: env.resources() for sid, env in live if isinstance(env, ServedEnvironment)}

    # -- leases ------------------------------------------------------------------------------------

    async def _run_in_session_executor(self, session_id: str, func: Callable[..., Any], *args, **kwargs):
        # A call renews the lease when it starts and when it ends; while it runs the session is busy.
        self._busy[session_id] = self._busy.get(session_id, 0) + 1
        self._update_session_activity(session_id)
        try:
            connection = self._connections.get(session_id)
            if connection is None:  # an HTTP session: its lease reclaims it
                return await super()._run_in_session_executor(session_id, func, *args, **kwargs)
            return await self._watched(session_id, connection, functools.partial(func, *args, **kwargs))
        finally:
            left = self._busy.get(session_id, 1) - 1
            if left > 0:
                self._busy[session_id] = left
            else:
                self._busy.pop(session_id, None)
            self._update_session_activity(session_id)

    async def _watched(self, session_id: str, connection: Connection, call: Callable[[], Any]) -> Any:
        """Run a WebSocket session's call in its thread; if it outlasts WATCH_AFTER_S, listen to its
        socket meanwhile. openenv's handler reads nothing until the call returns, so a client that
        leaves (closes, or is killed) mid-step would otherwise hold its sandbox and slot until the
        step's own timeout. A quick step costs one timer: no listener, no extra event-loop hop."""
        loop = asyncio.get_running_loop()
        running = loop.run_in_executor(self._session_executors.get(session_id, self._executor), call)
        timer = loop.call_later(WATCH_AFTER_S, self._watch, session_id, connection, running)
        try:
            return await running
        except asyncio.CancelledError:
            if connection.left_mid_call is None:  # not ours (shutdown): let it through
                raise
            # openenv's handler answers this (to no one, or to a client that said goodbye), then
            # reads the message waiting in connection.next (the disconnect, or the close) and ends.
            raise SessionEndedError(f"the client {connection.left_mid_call} during the call") from None
        finally:
            timer.cancel()

    def _watch(self, session_id: str, connection: Connection, running: asyncio.Future) -> None:
        """A long call: read the socket's next message now (the handler gets it next either way)."""
        if running.done():
            return
        if connection.next is None:
            connection.next = asyncio.ensure_future(connection.receive())
        connection.next.add_done_callback(functools.partial(self._heard, session_id, connection, running))

    def _heard(self, session_id: str, connection: Connection, running: asyncio.Future, heard: Any) -> None:
        """The socket's next message arrived while the call runs: a message sent ahead waits for the
        handler; a disconnect or openenv's close ends the session now, its slot freed at once."""
        if running.done() or heard.cancelled() or heard.exception() is not None:
            return
        message = heard.result()
        leaving = message.get("type") == "websocket.disconnect"
        if not leaving and not asks_to_close(message):
            return
        connection.close_requested = connection.close_requested or not leaving
        connection.gone = connection.gone or leaving  # nothing more can reach this client
        connection.left_mid_call = "left" if leaving else "closed the session"
        forgotten = self._forget(session_id, DISCONNECTED if leaving else CLOSED, "")
        running.cancel()  # the handler stops waiting; the thread's call ends once its sandbox is closed
        if forgotten is not None:
            task = asyncio.ensure_future(self._release_abandoned(*forgotten))
            self._releasing.add(task)  # a reference, or the task could be collected mid-way
            task.add_done_callback(self._releasing.discard)

    async def run_in_session(self, session_id: str, func: Callable[..., Any], *args, **kwargs) -> Any:
        """Run `func` in the session's own thread (where its sandbox was made), renewing its lease."""
        return await self._run_in_session_executor(session_id, func, *args, **kwargs)

    def touch(self, session_id: str, step: bool = False) -> None:
        """Renew the session's lease (and count a step)."""
        self._update_session_activity(session_id, increment_step=step)

    async def _reap_idle_sessions(self) -> None:
        """openenv's reaper, with a check interval that suits short leases too, busy sessions spared,
        and the reason kept for the session's later callers."""
        timeout = self._session_idle_timeout_s
        if timeout is None:
            return
        interval = min(max(timeout / 4, 0.1), 5.0)
        while True:
            try:
                await asyncio.sleep(interval)
                now = time.time()
                async with self._session_lock:
                    stale = [
                        (sid, now - info.last_activity_at)
                        for sid, info in self._session_info.items()
                        if now - info.last_activity_at > timeout and not self._busy.get(sid)
                    ]
                for sid, idle in stale:
                    await self._destroy_session(sid, EXPIRED, self.expired_message(idle), idle_over=timeout)
            except asyncio.CancelledError:
                break
            except Exception as exc:  # the reaper must outlive one bad close
                log.warning("idle-session reaper: %s (will retry)", exc)

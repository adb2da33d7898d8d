"""The OpenEnv server of a sandbox: openenv-core's HTTPEnvServer (its /ws protocol, so openenv's
GenericEnvClient and TRL work unchanged) plus HTTP sessions with leases.

Routes:
- `/ws`: openenv's WebSocket sessions (reset / step / state / close messages), one sandbox each.
- `POST /sessions` -> {session_id, lease_s}; `POST /sessions/{id}/reset` (body: {seed?, task_id?,
  episode_id?}); `POST /sessions/{id}/step` (body: {"action": {"kind": ..., "arguments": {...}},
  "timeout_s"?: seconds, past which the step's sandbox is closed and the episode ends with the error});
  `GET /sessions/{id}/state`; `DELETE /sessions/{id}`. Unknown session 404, expired lease 410, over
  the session limit 503, a malformed body 400/422, a step before reset 409; each says what to do.
- `/schema` (SandboxAction / SandboxObservation / SandboxState), `/metadata` (the domain's action
  space), `/health` (open even with a token).

Every request and handshake passes `auth.Guard` first (Host, Origin, token, JSON bodies, body size),
and every WebSocket message `connection.ConnectionTracker` (its size).

openenv's stateless `/reset`, `/step` and `/state` would build a fresh environment per request, outside
the session limit: they are left out (openenv's production mode), as are its `/mcp` routes (an MCP
JSON-RPC face for environments that are MCP servers, which a sandbox is not).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import SchemaResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandboxes.base import Sandbox, SandboxError
from sandboxes.domains import KNOWN_DOMAINS, REPLAY_BACKEND, SPECS, domain_spec
from sandboxes.serve import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_STEPS
from sandboxes.serve.auth import DEFAULT_MAX_ACTION_BYTES, Guard, HostPolicy
from sandboxes.serve.connection import ConnectionTracker
from sandboxes.serve.environment import EpisodeStateError
from sandboxes.serve.models import SandboxAction, SandboxObservation, SandboxState
from sandboxes.serve.pool import (
    CLOSED,
    EXPIRED,
    ServedEnvironment,
    ServeStats,
    SessionEndedError,
    SessionPool,
)
from sandboxes.serve.sockets import register_routes
from sandboxes.tasks import TaskSpec, embedded_tasks, load_tasks
from schemas.records import Environment, Task

WS_HARD_CAP_BYTES = 16 * 1024 * 1024  # uvicorn's default ws_max_size, named: what a message may cost us
STEP_SHAPE = '{"action": {"kind": "<kind>", "arguments": {...}}}'


# -- what a session serves -------------------------------------------------------------------------


def real_sandbox_factory(
    domain: str, backend: str | None = None, config: dict[str, Any] | None = None
) -> Callable[[], Sandbox]:
    """Fresh real sandboxes of `domain`, built like a recorded environment and never on the host:
    under `backend`, one of the domain's isolated backends (its first by default: bwrap for the
    terminal, swe and mcp). `config` is that environment's config."""
    spec = domain_spec(domain)
    choices = spec.isolated_backends
    if backend and not choices:
        with_choice = ", ".join(s.name for s in SPECS if s.isolated_backends)
        raise ValueError(f"--backend applies to {with_choice}; the {domain} sandbox has none to choose")
    if backend and backend not in choices:
        raise ValueError(f"the {domain} backend must be one of {', '.join(choices)}, not {backend!r}")
    config = dict(config or {})
    if choices:
        # Recorded under it (so its options in `config` carry over) and replayed under it.
        backend = backend or choices[0]
        config[REPLAY_BACKEND] = backend
    environment = Environment(name=domain, backend=backend or "", config=config)
    return functools.partial(spec.replay_sandbox, environment)


def task_suite(domain: str, path: str | None = None) -> list[TaskSpec]:
    """The tasks of `path` (JSONL), else the domain's embedded suite. A malformed line is an error."""
    if path is None:
        # collectors.<package>/tasks.jsonl holds the domain's suite.
        return embedded_tasks(domain_spec(domain).package)
    specs, errors = load_tasks(path)
    if errors:
        raise ValueError(f"{path} has malformed tasks: " + "; ".join(str(e) for e in errors[:5]))
    if not specs:
        raise ValueError(f"{path} holds no tasks")
    return specs


# -- the app ---------------------------------------------------------------------------------------


def build_app(
    sandbox_factory: Callable[[], Sandbox],
    tasks: Sequence[Task],
    *,
    domain: str,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_timeout_s: float | None = DEFAULT_IDLE_TIMEOUT_S,
    max_steps: int = DEFAULT_MAX_STEPS,
    token: str | None = None,
    host: str = "127.0.0.1",
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    max_action_bytes: int = DEFAULT_MAX_ACTION_BYTES,
) -> FastAPI:
    """The ASGI app serving `domain`'s sandboxes; `app.state.pool` is its SessionPool and
    `app.state.stats` its ServeStats. Run it with `run` (or any ASGI server).

    `host` is the address it will listen on: the Host names it answers follow from it, plus
    `allow_hosts` ("*.example.org" patterns, "*" for any); `allow_origins` are the web origins
    ("http://host:port", "*") whose pages may call it besides its own. `max_action_bytes` bounds a
    request body and a WebSocket message. `token`: the bearer token every call but /health needs."""
    if domain not in KNOWN_DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; known domains: {', '.join(KNOWN_DOMAINS)}")
    if max_sessions < 1:
        raise ValueError("max_sessions must be at least 1")
    if idle_timeout_s is not None and idle_timeout_s <= 0:
        raise ValueError("idle_timeout_s must be positive (None: sessions never expire)")
    if max_action_bytes < 1024:
        raise ValueError("max_action_bytes must be at least 1024 (a reset message alone takes ~100)")
    stats = ServeStats()
    env_factory = functools.partial(
        ServedEnvironment, sandbox_factory, list(tasks), domain=domain, max_steps=max_steps, stats=stats
    )
    env_factory().close()  # fail now, not per session, on bad tasks or limits (makes no sandbox)
    pool = SessionPool(env_factory, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s, stats=stats)
    app = FastAPI(
        title=f"AgentWorld {domain} sandbox (OpenEnv)",
        version="1",
        description=__doc__,
    )
    app.state.pool, app.state.stats, app.state.max_action_bytes = pool, stats, max_action_bytes

    @app.get("/schema", response_model=SchemaResponse, tags=["Schema"])
    async def schema() -> SchemaResponse:
        # openenv's own /schema publishes the base State; ours has the sandbox's fields.
        return SchemaResponse(
            action=SandboxAction.model_json_schema(),
            observation=SandboxObservation.model_json_schema(),
            state=SandboxState.model_json_schema(),
        )

    _session_routes(app, pool)
    register_routes(app, pool)  # openenv's /ws and /health, /metadata, the reaper, shutdown
    app.add_middleware(ConnectionTracker, max_message_bytes=max_action_bytes)
    policy = HostPolicy.for_bind(host, allow_hosts, allow_origins)
    # Added last: outermost, so nothing else runs for a request it refuses.
    app.add_middleware(Guard, policy=policy, token=token or None, max_body_bytes=max_action_bytes)
    return app


class _Problem(Exception):
    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.detail, self.extra = status, detail, extra

    def response(self) -> JSONResponse:
        return JSONResponse({"detail": self.detail, **self.extra}, status_code=self.status)


class _ResetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, max_length=255)
    task_id: str | None = None


def _explain(exc: ValidationError, prefix: str = "") -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in (prefix, *error["loc"]) if p != "")
        parts.append(f"{where or 'body'}: {error['msg']}")
    return "; ".join(parts)


async def _json_object(request: Request) -> dict[str, Any] | None:
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Problem(400, f"the request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise _Problem(422, f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _session_routes(app: FastAPI, pool: SessionPool) -> None:
    def live(session_id: str) -> ServedEnvironment:
        env = pool.http_env(session_id)
        if isinstance(env, ServedEnvironment):
            return env
        ended = pool.ended(session_id)
        if ended is None:
            raise _Problem(
                404,
                f"unknown session {session_id!r}: this server never opened it (or forgot it long ago); "
                "open one with POST /sessions",
            )
        why, message = ended
        if why == EXPIRED:
            raise _Problem(410, f"session {session_id!r}: {message}", lease_s=pool.idle_timeout_s)
        what = "was closed" if why == CLOSED else f"has ended ({why})"
        raise _Problem(404, f"session {session_id!r} {what}; open a new one with POST /sessions")

    async def call(session_id: str, func: Callable[..., Any], *args, **kwargs):
        try:
            return await pool.run_in_session(session_id, func, *args, **kwargs)
        except SessionEndedError as exc:  # reclaimed while this call waited
            live(session_id)  # raises the 404 / 410 that says why
            raise _Problem(410, str(exc)) from exc
        except EpisodeStateError as exc:
            raise _Problem(409, str(exc)) from exc
        except ValueError as exc:  # an unknown task_id
            raise _Problem(422, str(exc)) from exc
        except SandboxError as exc:
            raise _Problem(500, f"the sandbox failed: {type(exc).__name__}: {exc}") from exc

    def handled(handler: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(handler)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await handler(*args, **kwargs)
            except _Problem as problem:
                return problem.response()

        return wrapper

    @app.post("/sessions", status_code=201, tags=["Sessions"], summary="Open a session (one sandbox)")
    @handled
    async def open_session() -> dict[str, Any]:
        try:
            session_id = await pool.open_http_session()
        except SessionCapacityError as exc:
            raise _Problem(
                503, str(exc), active_sessions=exc.active_sessions, max_sessions=exc.max_sessions
            ) from exc
        except EnvironmentFactoryError as exc:
            raise _Problem(500, f"could not make the session's environment: {exc.__cause__ or exc}") from exc
        return {
            "session_id": session_id,
            "lease_s": pool.idle_timeout_s,
            "lease": pool.lease_text() + "; every call renews it",
        }

    @app.post("/sessions/{session_id}/reset", tags=["Sessions"], summary="Start an episode")
    @handled
    async def reset(session_id: str, request: Request) -> dict[str, Any]:
        env = live(session_id)
        body = await _json_object(request) or {}
        try:
            options = _ResetBody.model_validate(body).model_dump(exclude_none=True)
        except ValidationError as exc:
            expected = "expected {seed?, task_id?, episode_id?}"
            raise _Problem(422, f"bad reset body: {_explain(exc)}; {expected}") from exc
        observation = await call(session_id, env.reset, **options)
        return serialize_observation(observation)

    @app.post("/sessions/{session_id}/step", tags=["Sessions"], summary="Take one action")
    @handled
    async def step(session_id: str, request: Request) -> dict[str, Any]:
        env = live(session_id)
        body = await _json_object(request)
        if body is None or not isinstance(body.get("action"), dict):
            got = "an empty body" if body is None else f"keys {sorted(body)}"
            raise _Problem(422, f"a step body is {STEP_SHAPE}; got {got} (see GET /schema)")
        unknown = set(body) - {"action", "timeout_s", "request_id"}
        if unknown:
            raise _Problem(422, f"unknown field(s) {sorted(unknown)} in the step body; it is {STEP_SHAPE}")
        try:
            action = SandboxAction.model_validate(body["action"])
        except ValidationError as exc:
            raise _Problem(
                422, f"bad action: {_explain(exc, 'action')}; an action is {{kind, arguments}} (GET /schema)"
            ) from exc
        timeout_s = body.get("timeout_s")
        if timeout_s is not None and (
            isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s <= 0
        ):
            raise _Problem(422, f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        # The episode closes the sandbox of a step that outlasts timeout_s and ends it with the error.
        observation = await call(session_id, env.step, action, timeout_s=timeout_s)
        return serialize_observation(observation)

    @app.get("/sessions/{session_id}/state", tags=["Sessions"], summary="The episode's state")
    @handled
    async def state(session_id: str) -> dict[str, Any]:
        env = live(session_id)
        pool.touch(session_id)
        return env.state.model_dump()

    @app.delete("/sessions/{session_id}", tags=["Sessions"], summary="Close a session and its sandbox")
    @handled
    async def close(session_id: str) -> dict[str, Any]:
        live(session_id)
        await pool.close_session(session_id)
        return {"session_id": session_id, "closed": True}


# -- running it ------------------------------------------------------------------------------------


class _Server(uvicorn.Server):
    """uvicorn's server that says when it accepts connections and, on SIGINT/SIGTERM, closes every
    sandbox and returns (rather than re-raising the signal), so the caller can print its summary."""

    def __init__(self, config: uvicorn.Config, pool: SessionPool, announce: Callable[[str], None]) -> None:
        super().__init__(config)
        self._pool, self._announce = pool, announce

    def url(self) -> str:
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._announce(self.url())

    def handle_exit(self, sig: int, frame: Any) -> None:
        self._pool.stopping = True  # sessions whose sockets close from here on end by shutdown
        super().handle_exit(sig, frame)
        self._captured_signals.clear()


def run(
    app: FastAPI,
    host: str,
    port: int,
    *,
    announce: Callable[[str], None],
    log_level: str = "warning",
    graceful_s: float = 30.0,
) -> None:
    """Serve `app` until SIGINT/SIGTERM; `announce(url)` once it accepts connections. Returns after
    every session's sandbox is closed. WebSocket pings (uvicorn's, every 20 s) find clients that
    vanished without closing their connection. A WebSocket message past `WS_HARD_CAP_BYTES` (or
    twice the app's action limit, if larger) closes its connection (1009) before it is read whole;
    below that, ConnectionTracker refuses one over the action limit and the session goes on."""
    ws_max_size = max(WS_HARD_CAP_BYTES, 2 * getattr(app.state, "max_action_bytes", 0))
    # uvloop: asyncio's own loop spent about 0.35 ms more per served step here (0.78 against 0.43 ms
    # for a step the sandbox refuses at once), a third of the hop's 1 ms budget.
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=graceful_s, lifespan="on",
        loop="uvloop", ws_max_size=ws_max_size,
    )  # fmt: skip
    _Server(config, app.state.pool, announce).run()

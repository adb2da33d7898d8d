"""`python -m sandboxes.serve --domain D`: serve a domain's sandboxes (or its simulator) over OpenEnv."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from sandboxes.domains import KNOWN_DOMAINS, SPECS, domain_spec
from sandboxes.serve import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_SESSIONS, DEFAULT_MAX_STEPS, SERVED_BACKENDS
from sandboxes.serve.auth import (
    DEFAULT_MAX_ACTION_BYTES,
    TOKEN_DIR,
    TOKEN_ENV,
    TokenRequiredError,
    check_bind,
    new_token,
    remove_token_file,
    resolve_token,
    token_path,
    write_token_file,
)
from schemas.cli import command_parser

EXAMPLES = f"""
examples:
  # terminal sandboxes in bubblewrap, on 127.0.0.1:8000, the embedded terminal tasks
  python -m sandboxes.serve --domain terminal

  # in docker instead, 8 sessions at most, reclaimed after 2 minutes idle, your own tasks
  python -m sandboxes.serve --domain terminal --backend docker --max-sessions 8 \\
      --idle-timeout 120 --tasks my-tasks.jsonl

  # the web domain's simulator: a world model behind an OpenAI-compatible endpoint
  python -m sandboxes.serve --domain web --simulator http://127.0.0.1:8001/v1 --simulator-model wm

  # reachable from other machines, with a token of your choosing
  {TOKEN_ENV}=$(openssl rand -hex 32) python -m sandboxes.serve --domain web --host 0.0.0.0

  # a client on this machine (openenv's own GenericEnvClient, plus the token header; connect() reads
  # a generated token from {TOKEN_DIR}/PORT.token)
  python -c 'from sandboxes.serve.client import connect
  with connect("http://127.0.0.1:8000").sync() as env:
      print(env.reset(task_id="files-create-notes").observation["text"])
      env.step({{"kind": "command", "arguments": {{"command": "ls"}}}})
      print(env.step({{"kind": "done"}}).reward)'

The server prints `serving <domain> on http://HOST:PORT` once it accepts connections, and on SIGINT or
SIGTERM closes every sandbox and prints a summary. Sessions: WebSocket /ws (openenv's protocol) and
HTTP POST /sessions, /sessions/ID/reset, /sessions/ID/step, GET /sessions/ID/state, DELETE /sessions/ID.

security: every call but GET /health needs `Authorization: Bearer TOKEN`. Without --token or
${TOKEN_ENV}, the server generates a token, prints it once (the line after
`serving`) and writes it to {TOKEN_DIR}/PORT.token (mode 0600, removed at
exit); --no-token serves loopback without one. A request or WebSocket handshake whose Host header is
not this server's (DNS rebinding) gets 421, one whose Origin is another site's (a web page) 403, a
request body that is not application/json 415, and one over --max-action-bytes 413; a WebSocket
message over it gets an error and the session goes on. A client that disconnects mid-step has its
sandbox closed and its session freed at once.
"""


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "python -m sandboxes.serve",
        "Serve a domain's sandboxes (or its simulator) as an OpenEnv environment: one sandbox "
        "per session, task rewards from the task verifiers.",
        EXAMPLES,
    )
    p.add_argument("--domain", required=True, choices=KNOWN_DOMAINS, help="the sandbox domain to serve")
    what = p.add_argument_group("sandboxes")
    what.add_argument(
        "--simulator",
        metavar="URL|GGUF",
        help="serve the simulated sandbox: a world model at this OpenAI-compatible endpoint (…/v1), or a"
        " GGUF file run by llama.cpp in this process (it can score, so task verdicts by likelihood)",
    )
    what.add_argument("--simulator-model", metavar="NAME", help="the model name the endpoint serves")
    what.add_argument(
        "--simulator-max-tokens", type=int, default=1024, metavar="N", help="tokens per simulated observation"
    )
    what.add_argument(
        "--backend",
        choices=SERVED_BACKENDS,
        help="where each sandbox runs, for "
        + ", ".join(f"{s.name} ({' or '.join(s.isolated_backends)})" for s in SPECS if s.isolated_backends)
        + "; default the first",
    )
    what.add_argument(
        "--sandbox-config",
        metavar="JSON",
        help="the sandbox's environment config, as a recorded trajectory has it (e.g. an MCP server entry)",
    )
    what.add_argument("--tasks", metavar="FILE", help="JSONL task file (default: the domain's embedded)")
    what.add_argument(
        "--max-steps", type=int, default=DEFAULT_MAX_STEPS, metavar="K", help="steps per episode at most"
    )
    net = p.add_argument_group("server")
    net.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    net.add_argument("--port", type=int, default=8000, help="port (0: any free one; the startup line says)")
    net.add_argument(
        "--max-sessions",
        type=int,
        default=DEFAULT_MAX_SESSIONS,
        metavar="N",
        help="concurrent sessions (one sandbox each), WebSocket and HTTP together",
    )
    net.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        metavar="SEC",
        help="a session idle this long is reclaimed and its sandbox closed (its lease)",
    )
    net.add_argument(
        "--token",
        help=f"bearer token clients must send (default ${TOKEN_ENV}, else one is generated and written "
        f"to {TOKEN_DIR}/PORT.token, mode 0600)",
    )
    net.add_argument(
        "--no-token",
        action="store_true",
        help="serve without a token (loopback only): any local process, and any page a local browser "
        "opens from an allowed origin, can then run actions",
    )
    net.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host header is NAME (a proxy's name, *.example.org, or *: any); "
        "by default only the listening address, localhost and IP addresses it can receive",
    )
    net.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages from ORIGIN (http://host:port, or *) call the server; by default a request "
        "carrying another site's Origin header is refused",
    )
    net.add_argument(
        "--max-action-bytes",
        type=int,
        default=DEFAULT_MAX_ACTION_BYTES,
        metavar="N",
        help="largest HTTP request body and WebSocket message, i.e. one action with its envelope "
        f"(default {DEFAULT_MAX_ACTION_BYTES}, 64 KiB); larger ones get 413 or an error, unrun",
    )
    net.add_argument("--log-level", default="warning", help="uvicorn's log level (stderr)")
    return p


def sandbox_factory(args: argparse.Namespace) -> Callable[[], Any]:
    from sandboxes.plugins import simulator_factory
    from sandboxes.serve.server import real_sandbox_factory

    if args.simulator:
        if args.backend or args.sandbox_config:
            raise ValueError("--backend and --sandbox-config configure real sandboxes, not --simulator")
        return simulator_factory(
            args.domain, args.simulator, model=args.simulator_model, max_new_tokens=args.simulator_max_tokens
        )
    if args.simulator_model:
        raise ValueError("--simulator-model needs --simulator URL")
    config = json.loads(args.sandbox_config) if args.sandbox_config else None
    if config is not None and not isinstance(config, dict):
        raise ValueError("--sandbox-config must be a JSON object")
    return real_sandbox_factory(args.domain, args.backend, config)


def probe(factory: Callable[[], Any], args: argparse.Namespace) -> None:
    """Build one sandbox, never started: a config the sandbox cannot take fails here, once."""
    try:
        factory().close()
    except (ValueError, TypeError, KeyError, OSError) as exc:
        hint = "" if args.simulator else " (--sandbox-config gives its config, as a recording has it)"
        raise ValueError(f"cannot build a {args.domain} sandbox: {exc}{hint}") from exc


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    token = resolve_token(args.token)
    if args.no_token and token is not None:
        given = "--token" if args.token else f"${TOKEN_ENV}"
        print(f"error: --no-token contradicts the token given by {given}", file=sys.stderr)
        return 2
    generated = token is None and not args.no_token
    if generated:
        token = new_token()
    try:
        check_bind(args.host, token)
    except TokenRequiredError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # Imported once the arguments are known to be good: openenv-core takes seconds to import.
    from sandboxes.plugins import PluginMissingError
    from sandboxes.serve.server import build_app, run, task_suite

    try:
        factory = sandbox_factory(args)
        probe(factory, args)
        tasks = [spec.task for spec in task_suite(args.domain, args.tasks)]
        app = build_app(
            factory,
            tasks,
            domain=args.domain,
            max_sessions=args.max_sessions,
            idle_timeout_s=args.idle_timeout,
            max_steps=args.max_steps,
            token=token,
            host=args.host,
            allow_hosts=args.allow_host,
            allow_origins=args.allow_origin,
            max_action_bytes=args.max_action_bytes,
        )
    except (PluginMissingError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.simulator and not domain_spec(args.domain).serve_tested:
        tested = " and ".join(spec.name for spec in SPECS if spec.serve_tested)
        print(
            f"note: only the {tested} sandboxes are tested behind this server; {args.domain}'s "
            "sandbox is built as a fidelity replay builds it (see --sandbox-config)",
            file=sys.stderr,
        )

    written: list[Path] = []

    def announce(url: str) -> None:
        where = "not in a file"
        if generated and token:  # written before the line that tells clients to come
            path = token_path(urlparse(url).port or args.port)
            try:
                write_token_file(path, token)
                written.append(path)
                where = f"in {path}, readable by you only, where sandboxes.serve.client.connect finds it"
            except OSError as exc:  # the printed token still works
                print(f"note: could not write the token to {path}: {exc}", file=sys.stderr)
        print(f"serving {args.domain} on {url}", flush=True)
        if generated:
            print(f"token {token} (clients send `Authorization: Bearer <token>`; it is {where})", flush=True)

    try:
        run(app, args.host, args.port, announce=announce, log_level=args.log_level)
    finally:
        for path in written:
            remove_token_file(path, token or "")
    print(f"stopped: {app.state.stats.summary()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

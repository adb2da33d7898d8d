"""The world model in place of a collector's environment, or behind it.

Every collector takes a world model, found through the `simulator` plugin (sandboxes.plugins), behind
an OpenAI-compatible endpoint or from a local GGUF file: `--backend simulator --model-endpoint URL`
(or `--model-gguf PATH`, llama.cpp in the collector's process) records simulated trajectories with the
same CLI and schema, skipping the domain's real tools; `--fallback-simulator URL` keeps the real
sandboxes and lets the runner finish on the world model an episode whose sandbox failed mid-way. The
endpoint is asked for its models before the run, so a wrong URL fails at once.

`--simulated-verdicts` says how the world model is asked a task's verifier (training.simulated_verify):
by likelihood (the default: the answers a real check could have recorded are scored, the likelier one
is the verdict; needs a backend with weights, so a GGUF) or by generation (the model writes the
check's answer; what an endpoint gets either way, since it cannot score).
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable

from collectors.options import CliError
from sandboxes.base import Sandbox
from sandboxes.plugins import PluginMissingError, simulator_factory

# The --backend every collector has besides its real ones: a world model in place of the environment.
SIMULATOR = "simulator"
MODEL_KEY_ENV = "AGENTWORLD_MODEL_API_KEY"
# How a simulated sandbox asks the world model a verifier (training.simulated_verify.METHODS, the
# default first); written out here because collectors do not import training (DESIGN 4).
VERDICT_METHODS = ("likelihood", "generation")


def add_simulator_arguments(parser: argparse.ArgumentParser) -> None:
    """--model-endpoint (with a collector's --backend simulator) and --fallback-simulator."""
    group = parser.add_argument_group(
        "simulator (a world model behind an OpenAI-compatible endpoint: vLLM, SGLang, llama.cpp; or a"
        " local GGUF file)"
    )
    where = group.add_mutually_exclusive_group()
    where.add_argument(
        "--model-endpoint", metavar="URL",
        help="with --backend simulator: the world model that stands in for the environment, e.g."
        " http://127.0.0.1:8000/v1; trajectories are recorded as simulated",
    )  # fmt: skip
    where.add_argument(
        "--model-gguf", metavar="PATH",
        help="with --backend simulator: the world model as a GGUF file (python -m training.export gguf),"
        " run by llama.cpp in this process; it can score answers, so verdicts by likelihood",
    )  # fmt: skip
    group.add_argument(
        "--simulated-verdicts", choices=VERDICT_METHODS, default=VERDICT_METHODS[0],
        help="how the world model is asked a task's verifier: likelihood (default: the answers a real"
        " check could record, e.g. its screen with PASS and with FAIL, are scored teacher-forced and the"
        " likelier is the verdict; an endpoint cannot score, so it falls back to generation, and the"
        " verdict's details say so) or generation (the model writes the check's answer, which is read)",
    )  # fmt: skip
    group.add_argument(
        "--model-name", metavar="NAME", help="model --model-endpoint serves (default: its first)"
    )
    group.add_argument(
        "--fallback-simulator", metavar="URL",
        help="when a real sandbox fails mid-episode, go on with the episode on the world model at URL"
        " (its steps marked simulated, the trajectory's environment.config.fallback says where and why)",
    )  # fmt: skip
    group.add_argument(
        "--fallback-model", metavar="NAME", help="model --fallback-simulator serves (default: its first)"
    )
    group.add_argument(
        "--model-api-key", metavar="KEY", help=f"the world model endpoint's key (default: ${MODEL_KEY_ENV})"
    )
    group.add_argument(
        "--model-max-tokens", type=int, default=1024, metavar="N",
        help="reply length cap per simulated step (1024)",
    )  # fmt: skip


def check_simulator_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The simulator options go together: refused with the option that is missing or out of place."""
    backend = getattr(args, "backend", None)
    if backend == SIMULATOR and not (args.model_endpoint or args.model_gguf):
        parser.error(
            "--backend simulator needs --model-endpoint URL (the world model's OpenAI-compatible"
            " endpoint, e.g. http://127.0.0.1:8000/v1) or --model-gguf PATH"
        )
    given = "--model-endpoint" if args.model_endpoint else "--model-gguf" if args.model_gguf else ""
    if given and backend != SIMULATOR:
        parser.error(
            f"{given} goes with --backend simulator; to go on on a simulator only when the"
            " real sandbox fails, give --fallback-simulator URL"
        )
    if args.model_gguf and not os.path.isfile(args.model_gguf):
        parser.error(
            f"--model-gguf {args.model_gguf}: no such file (python -m training.export gguf makes one)"
        )
    if args.model_name and not args.model_endpoint:
        parser.error("--model-name goes with --model-endpoint")
    if args.fallback_simulator and backend == SIMULATOR:
        parser.error(
            "--fallback-simulator is for real sandboxes; with --backend simulator every step is simulated"
        )
    if args.fallback_model and not args.fallback_simulator:
        parser.error("--fallback-model goes with --fallback-simulator")
    if args.model_max_tokens < 1:
        parser.error("--model-max-tokens must be at least 1")


def simulated(args: argparse.Namespace) -> bool:
    """--backend simulator: no real sandbox, so no real tools to look for before the run."""
    return getattr(args, "backend", None) == SIMULATOR


def simulator_sandboxes(args: argparse.Namespace, domain: str) -> Callable[[], Sandbox]:
    """The factory of simulated `domain` sandboxes of --backend simulator; CliError (exit 2) when
    the simulator is not installed or the endpoint does not serve the model."""
    if args.model_gguf:
        factory, _ = _simulator(args, domain, args.model_gguf, None, "--model-gguf")
    else:
        factory, _ = _simulator(args, domain, args.model_endpoint, args.model_name, "--model-endpoint")
    try:  # one sandbox now (no request is made), so a domain the simulator cannot load fails here
        factory().close()
    except Exception as exc:
        raise CliError(f"cannot build a simulated {domain} sandbox: {type(exc).__name__}: {exc}") from exc
    return factory


def fallback_sandboxes(args: argparse.Namespace, domain: str) -> tuple[Callable[[], Sandbox], dict] | None:
    """(factory, record) of --fallback-simulator, None without it: what the runner takes an episode
    over with and what it records in environment.config["fallback"] (model, endpoint)."""
    if not getattr(args, "fallback_simulator", None):
        return None
    return _simulator(args, domain, args.fallback_simulator, args.fallback_model, "--fallback-simulator")


def _simulator(
    args: argparse.Namespace, domain: str, endpoint: str, model: str | None, option: str
) -> tuple[Callable[[], Sandbox], dict]:
    key = args.model_api_key or os.environ.get(MODEL_KEY_ENV) or None
    options = {"max_new_tokens": args.model_max_tokens, "seed": args.seed}
    options["verdicts"] = getattr(args, "simulated_verdicts", VERDICT_METHODS[0])
    if option != "--model-gguf":  # a GGUF file is the model itself: no server to ask
        options.update(model=served_model(endpoint, model, key, option), api_key=key)
    try:
        factory = simulator_factory(domain, endpoint, **options)
    except PluginMissingError as exc:
        raise CliError(str(exc)) from exc
    except ImportError as exc:  # the entry point is registered, its dependencies are not installed
        raise CliError(f"the simulator cannot load ({exc}): pip install -e '.[training]'") from exc
    return factory, {"model": options.get("model", endpoint), "endpoint": endpoint}


def served_model(
    endpoint: str, model: str | None, api_key: str | None, option: str = "--model-endpoint"
) -> str:
    """`model` if `endpoint` serves it, else (None) the first model it serves; asked once before the
    run so an endpoint that is down, refuses the key or serves another model fails here, not in
    every episode."""
    request = urllib.request.Request(f"{endpoint.rstrip('/')}/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            served = [str(entry["id"]) for entry in json.load(response)["data"]]
    except urllib.error.HTTPError as exc:
        hint = {401: "give its key with --model-api-key", 403: "give its key with --model-api-key"}.get(
            exc.code, "is it an OpenAI-compatible URL ending in /v1?"
        )
        raise CliError(f"{option} {endpoint}: GET /models answered HTTP {exc.code}; {hint}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(
            f"{option} {endpoint} does not answer ({reason}): start the model server or fix the URL"
            " (e.g. http://127.0.0.1:8000/v1)"
        ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(
            f"{option} {endpoint}: /models is not an OpenAI-compatible model list ({exc})"
        ) from exc
    if not served:
        raise CliError(f"{option} {endpoint} serves no model")
    if model is None:
        return served[0]
    if model not in served:
        raise CliError(f"{option} {endpoint} does not serve {model!r}; it serves: {', '.join(served)}")
    return model

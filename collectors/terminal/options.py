"""The terminal collector's own options and sandbox setup (see collectors/terminal/__main__.py)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from collectors.cli import Plan, Sandboxes
from collectors.options import CliError
from collectors.policies.base import Policy
from collectors.terminal.explorer import ExplorerPolicy
from collectors.terminal.harbor import run_harbor
from sandboxes.base import SandboxError
from sandboxes.terminal import TerminalConfig, TerminalSandbox, make_backend
from sandboxes.terminal.backends import bwrap_limits
from sandboxes.terminal.config import DEFAULT_IMAGE, Backend, BwrapBackend
from schemas.lock import DatasetLock

DESCRIPTION = "Record terminal (tmux shell) trajectories with a fleet of isolated sandboxes."
BACKEND_HELP = "where the shell runs"
SETUP_HINT = "run `make setup` or `bash infra/terminal-image/build.sh`"


def add_options(parser: argparse.ArgumentParser, sandbox: Any) -> None:
    sandbox.add_argument("--image", default=DEFAULT_IMAGE, help=f"docker image ({DEFAULT_IMAGE})")
    sandbox.add_argument(
        "--command-timeout", type=float, default=30.0, metavar="SEC", help="per command (30)"
    )
    sandbox.add_argument(
        "--cpus", type=float, default=1.0, help="CPUs per sandbox, docker/bwrap with cgroups (1.0)"
    )
    sandbox.add_argument(
        "--memory", default="512m", help="memory per sandbox; per process with bwrap rlimits (512m)"
    )
    sandbox.add_argument(
        "--pids-limit", type=int, default=256, help="processes per sandbox, docker/bwrap (256)"
    )
    sandbox.add_argument(
        "--limits", choices=("auto", "cgroup", "rlimit"), default="auto",
        help="how bwrap bounds memory/processes/CPU: a cgroup per sandbox (needs root), per-process"
        " rlimits, or auto: cgroup where possible, else rlimit (auto)",
    )  # fmt: skip
    sandbox.add_argument(
        "--cpu-seconds", type=int, default=600, metavar="SEC",
        help="bwrap with rlimits: CPU time per process before the kernel kills it (600)",
    )  # fmt: skip
    harbor = parser.add_argument_group("Harbor task folders (see collectors/terminal/harbor.py)")
    harbor.add_argument(
        "--harbor-tasks", metavar="DIR",
        help="run the Harbor task folders in DIR (or the one folder DIR): each validated by its"
        " solution/solve.sh, then --episodes (1) of --policy each, rewarded by its tests/test.sh",
    )  # fmt: skip
    harbor.add_argument(
        "--map-base-images", action="store_true",
        help="build a task whose FROM image is not here on the local terminal image (ubuntu, debian,"
        " python, buildpack-deps, bash -> agentworld/terminal:3)",
    )  # fmt: skip
    harbor.add_argument(
        "--allow-network", action="store_true",
        help="give network to the Harbor tasks whose task.toml asks for it (none otherwise)",
    )  # fmt: skip


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.harbor_tasks and (
        args.tasks or args.shard or args.backend != "docker" or args.fallback_simulator
    ):
        parser.error(
            "--harbor-tasks runs each task in its own docker image: no --tasks, --shard or"
            " --fallback-simulator, --backend docker"
        )


def explorer(args: argparse.Namespace, found: object) -> Policy:
    return ExplorerPolicy(command_timeout=min(10.0, args.command_timeout))


def run_instead(args: argparse.Namespace, lock: DatasetLock) -> int | None:
    """Harbor task folders run their own way (oracle first, then the policy), not through the fleet."""
    return run_harbor(args, lock) if args.harbor_tasks else None


def terminal_config(args: argparse.Namespace) -> TerminalConfig:
    try:
        return TerminalConfig(backend=_backend(args), command_timeout=args.command_timeout)
    except ValueError as exc:  # a malformed --memory, say
        raise CliError(str(exc)) from exc


def _backend(args: argparse.Namespace) -> Backend:
    if args.backend == "docker":
        return make_backend(
            "docker", image=args.image, cpus=args.cpus, memory=args.memory, pids_limit=args.pids_limit
        )
    if args.backend == "bwrap":
        return make_backend(
            "bwrap",
            memory=args.memory,
            pids_limit=args.pids_limit,
            cpus=args.cpus,
            cpu_seconds=args.cpu_seconds,
            limits=args.limits,
        )
    return make_backend("local")


def check_backend(args: argparse.Namespace) -> None:
    """Missing programs or image: say how to get them instead of failing in every worker."""
    needed = ["tmux"] + {"docker": ["docker"], "bwrap": ["bwrap"], "local": []}[args.backend]
    missing = [tool for tool in needed if shutil.which(tool) is None]
    if missing:
        raise CliError(f"{', '.join(missing)} not found; {SETUP_HINT}")
    if args.backend == "bwrap":
        backend = terminal_config(args).backend
        assert isinstance(backend, BwrapBackend)
        try:
            bwrap_limits(backend)
        except SandboxError as exc:
            raise CliError(str(exc)) from exc
    if args.backend != "docker":
        return
    probe = subprocess.run(["docker", "image", "inspect", args.image], capture_output=True, text=True)
    if probe.returncode == 0:
        return
    if "No such image" in probe.stderr or "No such object" in probe.stderr:
        raise CliError(f"docker image {args.image} is missing; {SETUP_HINT}")
    raise CliError(f"docker is not usable ({probe.stderr.strip()}); is dockerd running?")


@contextmanager
def sandboxes(plan: Plan) -> Iterator[Sandboxes]:
    args = plan.args
    if args.backend == "local":
        print("warning: --backend local runs commands on THIS HOST, unisolated", file=sys.stderr)
    config = terminal_config(args)
    yield Sandboxes(lambda: TerminalSandbox(config), preflight=lambda: check_backend(args))

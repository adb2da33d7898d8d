"""Record terminal trajectories: `python -m collectors.terminal --sandboxes N --episodes M --out DIR`."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from collectors.cli import (
    CliError,
    add_fleet_arguments,
    load_task_specs,
    main_guard,
    open_output,
    policy_factory,
    run_cli,
    simulated,
    simulator_sandboxes,
    validate_counts,
)
from collectors.terminal.harbor import run_harbor
from sandboxes.base import SandboxError
from sandboxes.terminal import TerminalConfig, TerminalSandbox, make_backend, parse_action
from sandboxes.terminal.backends import bwrap_limits
from sandboxes.terminal.config import DEFAULT_IMAGE, Backend, BwrapBackend
from sandboxes.terminal.reaper import reap_orphans, reap_own

EPILOG = """examples:
  # 4 isolated containers, 20 explorer episodes over the embedded task suite
  python -m collectors.terminal --sandboxes 4 --episodes 20 --out data/terminal

  # play the scripted solutions of your own tasks under bubblewrap
  python -m collectors.terminal --tasks my_tasks.jsonl --policy scripted --backend bwrap --out data/mine

  # replay a recorded dataset's actions in fresh sandboxes (sim-vs-real comparison)
  python -m collectors.terminal --policy replay --replay-from data/terminal --out data/replayed

  # Harbor task folders (Terminal-Bench 2's format): oracle-validated, then the policy, rewarded
  python -m collectors.terminal --harbor-tasks collectors/terminal/harbor_tasks --map-base-images \\
      --policy explorer --episodes 2 --out data/harbor

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.terminal --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --sandboxes 8 --out data/llm

  # a world model in place of the shell (no docker, bwrap or tmux needed): recorded as simulated
  python -m collectors.terminal --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/terminal-sim

  # real containers; an episode whose container dies goes on on the world model, marked turn by turn
  python -m collectors.terminal --fallback-simulator http://localhost:8000/v1 --episodes 20 --out data/t

Rerunning the same command resumes: committed episodes are skipped, the rest recorded.
SIGINT/SIGTERM stop cleanly (exit 130/143); in-flight episodes are kept with outcome "aborted",
episodes stopped before their first step stay pending, and no container or tmux server remains.
One collector per --out: a second one on the same directory exits with code 2 naming the first.
"""

SETUP_HINT = "run `make setup` or `bash infra/terminal-image/build.sh`"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.terminal",
        description="Record terminal (tmux shell) trajectories with a fleet of isolated sandboxes.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fleet_arguments(parser)
    sandbox = parser.add_argument_group("terminal sandbox")
    sandbox.add_argument(
        "--backend", choices=("docker", "bwrap", "local", "simulator"), default="docker",
        help="where the shell runs; simulator: a world model answers instead (needs --model-endpoint)"
        " (docker)",
    )  # fmt: skip
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
    args = parser.parse_args(argv)
    validate_counts(parser, args)
    if args.harbor_tasks and (
        args.tasks or args.shard or args.backend != "docker" or args.fallback_simulator
    ):
        parser.error(
            "--harbor-tasks runs each task in its own docker image: no --tasks, --shard or"
            " --fallback-simulator, --backend docker"
        )
    return args


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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def run() -> int:
        with open_output(args.out) as lock:
            if args.backend == "local":
                print("warning: --backend local runs commands on THIS HOST, unisolated", file=sys.stderr)
            reaped = {} if simulated(args) else reap_orphans()
            if any(reaped.values()):
                print(
                    f"removed {reaped['containers']} containers, {reaped['tmux_servers']} tmux servers and"
                    f" {reaped['process_boxes']} process boxes left behind by a collector that died",
                    file=sys.stderr,
                )
            if args.harbor_tasks:
                return run_harbor(args, lock)
            tasks = load_task_specs(args, "terminal")
            explorer = {"command_timeout": min(10.0, args.command_timeout)}
            policy = policy_factory(args, tasks, parse_action=parse_action, explorer_options=explorer)
            if simulated(args):
                return run_cli(args, "terminal", simulator_sandboxes(args, "terminal"), policy, lock)
            config = terminal_config(args)
            try:
                return run_cli(
                    args,
                    "terminal",
                    lambda: TerminalSandbox(config),
                    policy,
                    lock,
                    preflight_sandbox=lambda: check_backend(args),
                )
            finally:
                # Every sandbox closes itself; this only matters when a worker did not stop in time.
                left = reap_own()
                if any(left.values()):
                    print(f"removed what stuck workers still held: {left}", file=sys.stderr)

    return main_guard(run)


if __name__ == "__main__":
    sys.exit(main())

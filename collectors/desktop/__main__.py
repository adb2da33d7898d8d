"""Record desktop (os) trajectories: `python -m collectors.desktop --displays N --episodes M --out DIR`."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

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
from collectors.desktop.explorer import DesktopExplorer
from sandboxes.base import Sandbox, SandboxError
from sandboxes.desktop.transport import Transport

if TYPE_CHECKING:  # paramiko is the desktop extra: imported only for --ssh
    from sandboxes.desktop.ssh import SshTransport

# The AgentWorldBench name of the domain; the packages are named `desktop`.
DOMAIN = "os"

EPILOG = """examples:
  # 2 local desktops (Xvfb + openbox + AT-SPI in bubblewrap), 20 explorer episodes over the
  # embedded calculator, editor and terminal tasks
  python -m collectors.desktop --displays 2 --episodes 20 --out data/os

  # the tasks' own actions (type 7+6 and Enter, save a file, ...) instead of the explorer
  python -m collectors.desktop --policy scripted --episodes 19 --out data/os-scripted

  # a remote Linux desktop over SSH: the host key must be in --known-hosts (unknown keys are refused
  # unless --accept-unknown-host, which records the key it sees)
  python -m collectors.desktop --ssh agent@10.0.0.5 --identity ~/.ssh/id_ed25519 \\
      --known-hosts ~/.ssh/known_hosts --episodes 50 --out data/os-remote

  # QEMU virtual machines booted from the project's own image (build it once with
  # `sudo infra/desktop-vm/build.sh`); KVM where /dev/kvm opens, software emulation otherwise
  python -m collectors.desktop --vm --displays 1 --episodes 5 --out data/os-vm

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.desktop --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --displays 4 --out data/os-llm

  # a world model in place of the desktop (no Xvfb, AT-SPI or VM needed): recorded as simulated
  python -m collectors.desktop --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/os-sim

Each task names the applications its reset starts in metadata.apps (calculator, editor, terminal).
Observations are the accessibility tree as text with a PNG screenshot attached; actions are
structured computer actions or pyautogui code, run inside the desktop's own display, never this
host's. Rerunning the same command resumes: committed episodes are skipped. One collector per --out.
"""

SETUP_HINT = (
    "run `make setup` (apt: xvfb openbox at-spi2-core python3-pyatspi gnome-calculator mousepad xterm)"
)
LOCAL_PROGRAMS = ("bwrap", "Xvfb", "openbox", "dbus-daemon", "xdotool")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.desktop",
        description="Record desktop (OS domain) trajectories: accessibility trees of real applications.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fleet_arguments(parser, sandboxes_alias="--displays")  # one desktop (display) per sandbox
    desktop = parser.add_argument_group("desktop sandbox")
    desktop.add_argument(
        "--backend", choices=("desktop", "simulator"), default="desktop",
        help="a real desktop (local, --ssh or --vm), or a world model that answers instead (needs"
        " --model-endpoint) (desktop)",
    )  # fmt: skip
    where = desktop.add_mutually_exclusive_group()
    where.add_argument("--ssh", metavar="USER@HOST[:PORT]", help="drive a remote Linux desktop over SSH")
    where.add_argument(
        "--vm", action="store_true", help="a QEMU VM per display, booted from the project image"
    )
    desktop.add_argument(
        "--known-hosts", metavar="FILE", help="--ssh: OpenSSH known_hosts holding the host key"
    )
    desktop.add_argument(
        "--identity", metavar="FILE", help="--ssh: private key file (default ~/.ssh/id_ed25519)"
    )
    desktop.add_argument(
        "--accept-unknown-host", action="store_true",
        help="--ssh: accept a host key not in --known-hosts and record it there (trust on first use)",
    )  # fmt: skip
    desktop.add_argument("--no-screenshots", action="store_true", help="observations without a screenshot")
    args = parser.parse_args(argv)
    validate_counts(parser, args)
    if not args.ssh and (args.known_hosts or args.identity or args.accept_unknown_host):
        parser.error("--known-hosts, --identity and --accept-unknown-host go with --ssh")
    if simulated(args) and (args.ssh or args.vm):
        parser.error("--ssh and --vm choose a real desktop; --backend simulator runs none")
    if args.ssh and not args.known_hosts:
        parser.error("--ssh needs --known-hosts FILE (the host key is verified against it)")
    return args


def ssh_transports(args: argparse.Namespace) -> Callable[[], SshTransport]:
    """A new SSH transport per sandbox, to the --ssh target, checked against --known-hosts."""
    try:
        from sandboxes.desktop.ssh import SshTarget, SshTransport
    except ImportError as exc:
        raise CliError("--ssh needs paramiko: pip install 'agentworld-data[desktop]'") from exc
    identity = args.identity or str(Path.home() / ".ssh" / "id_ed25519")
    if not os.path.isfile(identity):
        raise CliError(f"no SSH key at {identity}: give one with --identity FILE")
    if not os.path.isfile(args.known_hosts) and not args.accept_unknown_host:
        raise CliError(f"--known-hosts {args.known_hosts} does not exist; add the host's key to it")
    try:
        target = SshTarget.parse(
            args.ssh, identity, args.known_hosts, accept_unknown_host=args.accept_unknown_host
        )
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    return lambda: SshTransport(target)


def vm_transports() -> Callable[[], Transport]:
    """A new VM per sandbox, booted from the project's image (which must have been built)."""
    from sandboxes.desktop.vm import VmConfig, VmImage, VmTransport

    try:
        VmImage.default().require()
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    return lambda: VmTransport(config=VmConfig())


def check_ssh(make_transport: Callable[[], SshTransport], python: str) -> None:
    """Connect once before the fleet starts: an unknown or changed host key, a refused key or an
    unreachable host stops the run here with the reason, not in every episode."""
    transport = make_transport()
    try:
        # The guest program needs the target's python3 with AT-SPI's bindings (not on PyPI).
        transport.check([python, "-c", "import pyatspi"])
    except (SandboxError, TimeoutError, OSError) as exc:
        hint = "; the target needs: apt-get install python3-pyatspi" if "pyatspi" in str(exc) else ""
        raise CliError(f"--ssh: {exc}{hint}") from exc
    finally:
        transport.close()


def check_local(args: argparse.Namespace) -> None:
    """The local desktop's programs: say how to get them instead of failing in every worker."""
    if args.ssh or args.vm or simulated(args):
        return
    missing = [program for program in LOCAL_PROGRAMS if shutil.which(program) is None]
    if missing:
        raise CliError(f"{', '.join(missing)} not found; {SETUP_HINT}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def run() -> int:
        check_local(args)
        from sandboxes.desktop import DesktopConfig, DesktopSandbox, parse_action

        with open_output(args.out) as lock:
            tasks = load_task_specs(args, "desktop")
            policy = policy_factory(
                args, tasks, parse_action=parse_action, explorer=lambda: DesktopExplorer(parse_action)
            )
            if simulated(args):
                factory = simulator_sandboxes(args, DOMAIN)
                return run_cli(args, DOMAIN, factory, policy, lock, collector="collectors.desktop")
            config = DesktopConfig(screenshot=not args.no_screenshots)
            transports: Callable[[], Transport] | None = None
            preflight = None
            if args.ssh:
                ssh = ssh_transports(args)
                transports, preflight = ssh, lambda: check_ssh(ssh, config.python)
            elif args.vm:
                transports = vm_transports()

            def sandbox() -> Sandbox:
                return DesktopSandbox(config, transport=transports() if transports else None)

            return run_cli(
                args,
                DOMAIN,
                sandbox,
                policy,
                lock,
                preflight_sandbox=preflight,
                collector="collectors.desktop",
            )

    return main_guard(run)


if __name__ == "__main__":
    sys.exit(main())

"""The desktop collector's own options and desktop setup: local, over SSH or in VMs (see
collectors/desktop/__main__.py)."""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collectors.cli import Plan, Sandboxes
from collectors.desktop.explorer import DesktopExplorer
from collectors.options import CliError
from collectors.policies.base import Policy
from collectors.simulation import simulated
from sandboxes.base import Sandbox, SandboxError
from sandboxes.desktop.transport import Transport
from sandboxes.domains import domain_spec

if TYPE_CHECKING:  # paramiko is the desktop extra: imported only for --ssh
    from sandboxes.desktop.ssh import SshTransport

DESCRIPTION = "Record desktop (OS domain) trajectories: accessibility trees of real applications."
BACKEND_HELP = "a real desktop (local, --ssh or --vm)"
SANDBOXES_ALIAS = "--displays"  # one desktop (display) per sandbox
SETUP_HINT = (
    "run `make setup` (apt: xvfb openbox at-spi2-core python3-pyatspi gnome-calculator mousepad xterm)"
)
LOCAL_PROGRAMS = ("bwrap", "Xvfb", "openbox", "dbus-daemon", "xdotool")


def add_options(parser: argparse.ArgumentParser, desktop: Any) -> None:
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


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not args.ssh and (args.known_hosts or args.identity or args.accept_unknown_host):
        parser.error("--known-hosts, --identity and --accept-unknown-host go with --ssh")
    if simulated(args) and (args.ssh or args.vm):
        parser.error("--ssh and --vm choose a real desktop; --backend simulator runs none")
    if args.ssh and not args.known_hosts:
        parser.error("--ssh needs --known-hosts FILE (the host key is verified against it)")


def explorer(args: argparse.Namespace, found: object) -> Policy:
    return DesktopExplorer(domain_spec("desktop").parse_action)


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


def check_host(args: argparse.Namespace) -> None:
    """The local desktop's programs: say how to get them instead of failing in every worker."""
    if args.ssh or args.vm or simulated(args):
        return
    missing = [program for program in LOCAL_PROGRAMS if shutil.which(program) is None]
    if missing:
        raise CliError(f"{', '.join(missing)} not found; {SETUP_HINT}")


@contextmanager
def sandboxes(plan: Plan) -> Iterator[Sandboxes]:
    from sandboxes.desktop import DesktopConfig, DesktopSandbox

    args = plan.args
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

    yield Sandboxes(sandbox, preflight=preflight)

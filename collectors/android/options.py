"""The Android collector's own options, host plan and device setup: Appium's fake driver or a fleet
of emulators (see collectors/android/__main__.py)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any

from collectors.android.explorer import AndroidExplorer
from collectors.android.vocabulary import APP_NAMES, PACKAGES
from collectors.cli import Plan, Sandboxes
from collectors.options import CliError, load_task_specs
from collectors.policies.base import Policy
from collectors.simulation import simulated
from collectors.tasks import TaskSpec
from sandboxes.base import Sandbox, SandboxError
from sandboxes.domains import domain_spec

DESCRIPTION = "Record Android trajectories: a fleet of emulators driven through Appium (UiAutomator2)."
BACKEND_HELP = "emulators (or --fake-driver) through Appium"
SANDBOXES_ALIAS = "--emulators"  # one emulator per sandbox
NO_DEVICE_HINT = "or record without an emulator with --fake-driver (Appium's fake driver on app XML files)"


def add_options(parser: argparse.ArgumentParser, android: Any) -> None:
    android.add_argument("--avd", metavar="NAME", help="the AVD every emulator boots (read-only, shared)")
    android.add_argument("--sdk", metavar="DIR", help="Android SDK root (default $ANDROID_SDK_ROOT)")
    android.add_argument(
        "--appium-url", metavar="URL", help="use this running Appium server instead of starting our own"
    )
    android.add_argument(
        "--dry-run", action="store_true", help="print the fleet's resource plan for this host and stop"
    )
    android.add_argument(
        "--fake-driver", action="store_true",
        help="no emulator: Appium's fake driver on the embedded app XML tasks (tests, demos)",
    )  # fmt: skip
    android.add_argument(
        "--batch-size", type=int, default=8, metavar="B", help="emulators booted at once (8)"
    )
    android.add_argument(
        "--boot-timeout", type=float, default=300.0, metavar="SEC", help="per emulator boot (300)"
    )
    android.add_argument(
        "--devices-per-server", type=int, default=8, metavar="D", help="emulators per Appium server (8)"
    )
    android.add_argument(
        "--allow-overcommit", action="store_true",
        help="start more emulators than the host's cores/memory/disk allow (with a warning)",
    )  # fmt: skip
    android.add_argument("--snapshot", metavar="NAME", help="emulator snapshot a reset reloads when needed")
    android.add_argument("--max-nodes", type=int, default=300, metavar="K", help="tree nodes shown (300)")
    android.add_argument("--no-screenshots", action="store_true", help="observations without a screenshot")


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.batch_size < 1 or args.devices_per_server < 1 or args.max_nodes < 1:
        parser.error("--batch-size, --devices-per-server and --max-nodes must be at least 1")
    if simulated(args) and (args.fake_driver or args.dry_run or args.avd or args.appium_url):
        parser.error(
            "--avd, --appium-url, --fake-driver and --dry-run are for devices; --backend simulator runs none"
        )
    if not (args.fake_driver or args.dry_run or args.avd or simulated(args)):
        parser.error("--avd NAME is required (the AVD the emulators boot), unless --fake-driver or --dry-run")


def explorer(args: argparse.Namespace, found: object) -> Policy:
    return AndroidExplorer(domain_spec("android").parse_action)


def fleet_config(args: argparse.Namespace):  # -> sandboxes.android.fleet.FleetConfig
    from sandboxes.android.fleet import FleetConfig

    return FleetConfig(
        avd=args.avd or "(none)", sdk=args.sdk, batch_size=args.batch_size,
        boot_timeout_s=args.boot_timeout, allow_overcommit=args.allow_overcommit,
    )  # fmt: skip


def resource_plan(args: argparse.Namespace):  # -> sandboxes.android.fleet.ResourcePlan
    """The plan without making a fleet (which keeps a work directory): the same two calls it makes."""
    import tempfile

    from sandboxes.android.fleet.resources import make_plan, probe_host

    config = fleet_config(args)
    host = probe_host(tempfile.gettempdir())
    return make_plan(args.sandboxes, host, config.budget, config.batch_size, config.allow_overcommit)


def host_problems(args: argparse.Namespace, plan) -> list[str]:
    """What stops emulators on this host: no KVM, no SDK, a plan that does not fit."""
    from sandboxes.android.fleet import FleetError
    from sandboxes.android.fleet.sdk import find_programs

    problems = []
    if not plan.host.kvm:
        problems.append(f"no usable KVM: {plan.host.kvm_detail}; Android emulators need it")
    try:
        find_programs(args.sdk)
    except FleetError as exc:
        problems.append(str(exc))
    if plan.verdict == "refuse" and plan.host.kvm:
        problems += plan.reasons
    return problems


def check_host(args: argparse.Namespace) -> int | None:
    """--dry-run prints the plan (exit 0); emulators this host cannot run are refused with the plan
    and the reasons (exit 2) before anything is written."""
    emulators = not (args.fake_driver or simulated(args))
    if not (args.dry_run or emulators):
        return None
    plan = resource_plan(args)
    if args.dry_run:
        print(plan.text())
        return 0
    problems = host_problems(args, plan)
    if problems:
        print(plan.text())
        reasons = "\n".join(f"  - {p}" for p in problems)
        raise CliError(f"cannot start {args.sandboxes} emulators here:\n{reasons}\n{NO_DEVICE_HINT}")
    return None


def android_config(args: argparse.Namespace, fake: bool):  # -> sandboxes.android.config.AndroidConfig
    from sandboxes.android.config import FAKE, UIAUTOMATOR2, AndroidConfig

    return AndroidConfig(
        automation_name=FAKE if fake else UIAUTOMATOR2,
        apps={APP_NAMES[app]: package for app, package in PACKAGES.items()},
        snapshot=args.snapshot or "",
        screenshots=not args.no_screenshots,
        max_nodes=args.max_nodes,
    )


def select_tasks(args: argparse.Namespace) -> list[TaskSpec]:
    """--tasks as given; else the embedded tasks for the driver: app XML tasks (their XML carried in
    the task, so a recording replays anywhere) for --fake-driver, the real-app ones otherwise (the
    simulator's too: what emulators would run)."""
    specs = load_task_specs(args, "android")
    if args.tasks:
        return specs
    apps = resources.files("collectors.android").joinpath("apps")
    chosen = []
    for spec in specs:
        app = (spec.task.metadata or {}).get("app")
        if bool(app) != args.fake_driver:
            continue
        if app:
            metadata = {k: v for k, v in spec.task.metadata.items() if k != "app"}
            metadata["app_xml"] = apps.joinpath(str(app)).read_text(encoding="utf-8")
            spec = dataclasses.replace(spec, task=dataclasses.replace(spec.task, metadata=metadata))
        chosen.append(spec)
    return chosen


def start_server(args: argparse.Namespace):
    from collectors.android.servers import RemoteAppium
    from sandboxes.android.server import AppiumServer

    try:
        server = RemoteAppium(args.appium_url) if args.appium_url else AppiumServer()
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    try:
        server.start()
    except SandboxError as exc:
        server.close()
        raise CliError(str(exc)) from exc
    return server


@contextmanager
def sandboxes(plan: Plan) -> Iterator[Sandboxes]:
    from sandboxes.android.sandbox import AndroidSandbox

    args = plan.args
    if not args.fake_driver:
        with emulator_sandboxes(args) as emulators:
            yield emulators
        return
    config = android_config(args, fake=True)
    server = start_server(args)
    try:
        yield Sandboxes(lambda: AndroidSandbox(config, server=server))
    finally:
        server.close()


@contextmanager
def emulator_sandboxes(args: argparse.Namespace) -> Iterator[Sandboxes]:
    """Boots the emulators (fewer than asked when some fail: --sandboxes becomes the count booted)
    and their Appium servers; stops them all at the end."""
    from collectors.android.devices import DevicePool, DeviceSandbox
    from sandboxes.android.fleet import EmulatorFleet, FleetError
    from sandboxes.android.sandbox import AndroidSandbox

    config = android_config(args, fake=False)
    fleet = EmulatorFleet(fleet_config(args))
    servers: list = []
    try:
        try:
            devices = fleet.start(args.sandboxes, progress=lambda line: print(line, file=sys.stderr))
        except FleetError as exc:
            raise CliError(str(exc)) from exc
        if not devices:
            failures = "; ".join(f"{f.serial}: {f.error}" for f in fleet.failures)
            raise CliError(f"no emulator booted: {failures}")
        if len(devices) < args.sandboxes:
            print(f"warning: {len(devices)} of {args.sandboxes} emulators booted", file=sys.stderr)
            args.sandboxes = len(devices)
        groups = 1 if args.appium_url else -(-len(devices) // args.devices_per_server)
        servers = [start_server(args) for _ in range(groups)]
        pool = DevicePool(fleet, devices)

        def make(device) -> Sandbox:
            server = servers[min(pool.slot() // args.devices_per_server, len(servers) - 1)]
            return AndroidSandbox(config, device=device, server=server)

        yield Sandboxes(lambda: DeviceSandbox(pool, make))
    finally:
        for server in servers:
            server.close()
        fleet.stop()

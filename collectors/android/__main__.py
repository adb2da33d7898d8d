"""Record Android trajectories: `python -m collectors.android --emulators N --avd NAME --out DIR`."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from importlib import resources

from collectors.android.explorer import AndroidExplorer
from collectors.android.vocabulary import APP_NAMES, PACKAGES
from collectors.cli import (
    EXIT_USAGE,
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
from collectors.tasks import TaskSpec
from sandboxes.base import Sandbox, SandboxError

DOMAIN = "android"

EPILOG = """examples:
  # what 64 emulators would need on this host (cores, memory, disk, ports, KVM); starts nothing
  python -m collectors.android --emulators 64 --avd pixel_7_api34 --dry-run --out data/android

  # 64 headless emulators of one AVD (booted read-only in staged batches, one Appium server per 8),
  # 640 explorer episodes over Settings, Contacts, Clock and the other stock apps
  python -m collectors.android --emulators 64 --avd pixel_7_api34 --episodes 640 --out data/android

  # an Appium server you run yourself (devices already attached to it)
  python -m collectors.android --emulators 2 --avd pixel_7_api34 --appium-url http://127.0.0.1:4723/ \\
      --episodes 20 --out data/android

  # no emulator: Appium's fake driver on the embedded app XML files (tests and demos)
  python -m collectors.android --fake-driver --emulators 2 --episodes 6 --out data/android-fake

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.android --emulators 8 --avd pixel_7_api34 --policy llm \\
      --llm-base-url http://localhost:8000/v1 --llm-model Qwen/Qwen3-8B --episodes 100 --out data/android-llm

  # a world model in place of the device (no emulator, SDK or Appium): the real-app tasks, simulated
  python -m collectors.android --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/android-sim

Emulators need KVM and the Android SDK (the emulator and platform-tools packages; ANDROID_SDK_ROOT or
--sdk). On a host without either the command prints the resource plan it would need and stops
(exit status 2). Appium comes from `python -m sandboxes.android install --uiautomator2`. Each episode
starts by clearing the task app's data (or reloading --snapshot). Observations are the compacted UI
tree with a PNG screenshot; actions are AndroidWorld's JSON. Rerunning the same command resumes:
committed episodes are skipped. One collector per --out.
"""

NO_DEVICE_HINT = "or record without an emulator with --fake-driver (Appium's fake driver on app XML files)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.android",
        description="Record Android trajectories: a fleet of emulators driven through Appium (UiAutomator2).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fleet_arguments(parser, sandboxes_alias="--emulators")  # one emulator per sandbox
    android = parser.add_argument_group("android fleet")
    android.add_argument(
        "--backend", choices=("appium", "simulator"), default="appium",
        help="emulators (or --fake-driver) through Appium, or a world model that answers instead (needs"
        " --model-endpoint) (appium)",
    )  # fmt: skip
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
    args = parser.parse_args(argv)
    validate_counts(parser, args)
    if args.batch_size < 1 or args.devices_per_server < 1 or args.max_nodes < 1:
        parser.error("--batch-size, --devices-per-server and --max-nodes must be at least 1")
    if simulated(args) and (args.fake_driver or args.dry_run or args.avd or args.appium_url):
        parser.error(
            "--avd, --appium-url, --fake-driver and --dry-run are for devices; --backend simulator runs none"
        )
    if not (args.fake_driver or args.dry_run or args.avd or simulated(args)):
        parser.error("--avd NAME is required (the AVD the emulators boot), unless --fake-driver or --dry-run")
    return args


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
    the task, so a recording replays anywhere) for --fake-driver, the real-app ones otherwise."""
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


def run_fake(args: argparse.Namespace) -> int:
    from sandboxes.android.actions import parse_action
    from sandboxes.android.sandbox import AndroidSandbox

    config = android_config(args, fake=True)
    with open_output(args.out) as lock:
        tasks = select_tasks(args)
        policy = policy_factory(args, tasks, parse_action, explorer=lambda: AndroidExplorer(parse_action))
        server = start_server(args)
        try:
            return run_cli(args, DOMAIN, lambda: AndroidSandbox(config, server=server), policy, lock)
        finally:
            server.close()


def run_simulated(args: argparse.Namespace) -> int:
    """The real-app tasks (what emulators would run) against the world model."""
    from sandboxes.android.actions import parse_action

    with open_output(args.out) as lock:
        tasks = select_tasks(args)
        policy = policy_factory(args, tasks, parse_action, explorer=lambda: AndroidExplorer(parse_action))
        return run_cli(args, DOMAIN, simulator_sandboxes(args, DOMAIN), policy, lock)


def run_fleet_of_emulators(args: argparse.Namespace) -> int:
    from collectors.android.devices import DevicePool, DeviceSandbox
    from sandboxes.android.actions import parse_action
    from sandboxes.android.fleet import EmulatorFleet, FleetError
    from sandboxes.android.sandbox import AndroidSandbox

    config = android_config(args, fake=False)
    with open_output(args.out) as lock:
        tasks = select_tasks(args)
        policy = policy_factory(args, tasks, parse_action, explorer=lambda: AndroidExplorer(parse_action))
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

            return run_cli(args, DOMAIN, lambda: DeviceSandbox(pool, make), policy, lock)
        finally:
            for server in servers:
                server.close()
            fleet.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def run() -> int:
        if args.dry_run:
            print(resource_plan(args).text())
            return 0
        if args.fake_driver:
            return run_fake(args)
        if simulated(args):
            return run_simulated(args)
        plan = resource_plan(args)
        problems = host_problems(args, plan)
        if problems:
            print(plan.text())
            reasons = "\n".join(f"  - {p}" for p in problems)
            message = f"error: cannot start {args.sandboxes} emulators here:\n{reasons}\n{NO_DEVICE_HINT}"
            print(message, file=sys.stderr)
            return EXIT_USAGE
        return run_fleet_of_emulators(args)

    return main_guard(run)


if __name__ == "__main__":
    sys.exit(main())

"""The web collector's own options and browser setup (see collectors/web/__main__.py)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from collectors.cli import Plan, Sandboxes
from collectors.options import CliError, load_task_specs
from collectors.policies.base import Policy
from collectors.simulation import simulated
from collectors.tasks import TaskSpec, embedded_tasks
from collectors.web.explorer import WebExplorer
from collectors.web.start_urls import apply_allowed_origins, load_start_urls, parse_origin
from sandboxes.domains import domain_spec
from sandboxes.web.config import DIALOG_POLICIES, DOWNLOAD_POLICIES

DESCRIPTION = "Record web (accessibility-tree) trajectories with headless Chromium browsers."
BACKEND_HELP = "headless Chromium"
SANDBOXES_ALIAS = "--browsers"  # one browser per sandbox
SETUP_HINT = "install it with `apt-get install chromium` (or `make setup`); never `playwright install`"


def add_options(parser: argparse.ArgumentParser, web: Any) -> None:
    web.add_argument(
        "--start-urls", metavar="FILE",
        help="one start URL per line (# comments): a task each, instead of the embedded sites",
    )  # fmt: skip
    web.add_argument(
        "--allow-origin", action="append", default=[], metavar="ORIGIN",
        help="an origin (scheme://host[:port]) every task may also reach; repeatable",
    )  # fmt: skip
    web.add_argument("--screenshots", action="store_true", help="attach a PNG screenshot to each observation")
    web.add_argument(
        "--settle-timeout", type=int, default=3000, metavar="MS",
        help="longest wait after an action for the page to settle (3000)",
    )  # fmt: skip
    web.add_argument(
        "--dialogs", choices=DIALOG_POLICIES, default="accept",
        help="how alert/confirm/prompt/beforeunload dialogs are answered (accept)",
    )  # fmt: skip
    web.add_argument(
        "--prompt-text", metavar="TEXT", help="the answer to accepted prompt() dialogs (default: their own)"
    )
    web.add_argument(
        "--downloads", choices=DOWNLOAD_POLICIES, default="save",
        help="save downloads in each browser's own folder, or refuse them (save)",
    )  # fmt: skip
    web.add_argument("--chromium", default="/usr/bin/chromium", metavar="PATH", help="browser binary")


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.start_urls and args.tasks:
        parser.error("--start-urls and --tasks are alternatives: give one")


def explorer(args: argparse.Namespace, found: object) -> Policy:
    return WebExplorer(domain_spec("web").parse_action)


def select_tasks(args: argparse.Namespace) -> list[TaskSpec]:
    """The tasks of this run: --start-urls, else --tasks, else the embedded sites; plus --allow-origin."""
    try:
        extra = [parse_origin(origin) for origin in args.allow_origin]
    except ValueError as exc:
        raise CliError(f"--allow-origin: {exc}") from exc
    if args.start_urls:
        try:
            tasks = load_start_urls(args.start_urls)
        except OSError as exc:
            raise CliError(f"cannot read --start-urls {args.start_urls}: {exc}") from exc
        except ValueError as exc:
            raise CliError(f"--start-urls {exc}") from exc
    elif args.tasks:
        tasks = load_task_specs(args, "web")
    else:
        tasks = embedded_tasks("web")
    return apply_allowed_origins(tasks, extra)


def check_host(args: argparse.Namespace) -> None:
    """Say how to get Chromium and Playwright instead of failing in every worker. The simulator
    needs no browser, but the web package it reads actions with imports Playwright."""
    if not simulated(args) and not os.path.isfile(args.chromium):
        raise CliError(f"Chromium not found at {args.chromium}: {SETUP_HINT}")
    try:
        import playwright  # noqa: F401
    except ImportError as exc:
        raise CliError("the web collector needs Playwright: pip install 'agentworld-data[web]'") from exc


@contextmanager
def sandboxes(plan: Plan) -> Iterator[Sandboxes]:
    from sandboxes.web import WebConfig, WebSandbox, start_sites_server

    args = plan.args
    # One server for the embedded sites, shared by every browser of the fleet: each episode's fresh
    # browser context has its own cookies, so shop sessions never mix.
    with start_sites_server() as server:
        config = WebConfig(
            screenshots=args.screenshots,
            settle_timeout_ms=args.settle_timeout,
            sites_port=server.port,
            executable_path=args.chromium,
            dialog_policy=args.dialogs,
            prompt_text=args.prompt_text,
            downloads=args.downloads,
        )
        yield Sandboxes(lambda: WebSandbox(config))

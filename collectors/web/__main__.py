"""Record web trajectories: `python -m collectors.web --browsers N --episodes M --out DIR`."""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import sys

import fsspec

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
from collectors.tasks import TaskSpec, embedded_tasks
from collectors.web.explorer import WebExplorer
from collectors.web.start_urls import apply_allowed_origins, load_start_urls, parse_origin
from sandboxes.web.config import DIALOG_POLICIES, DOWNLOAD_POLICIES

EPILOG = """examples:
  # 2 browsers, 20 explorer episodes on the embedded shop and docs sites
  python -m collectors.web --browsers 2 --episodes 20 --out data/web

  # your own sites: one start URL per line; each may reach only its own origin unless allowed
  python -m collectors.web --start-urls urls.txt --allow-origin https://cdn.example.com \\
      --episodes 50 --out data/web-real

  # with a screenshot attached to every observation (large)
  python -m collectors.web --screenshots --episodes 5 --out data/web-shots

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.web --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --browsers 4 --out data/web-llm

  # a world model in place of the browser (no Chromium needed): recorded as simulated
  python -m collectors.web --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/web-sim

Browsers reach only each task's allowed origins (request interception); the embedded sites are
served on 127.0.0.1 by this process and reached as http://shop.agentworld.test/ and
http://docs.agentworld.test/. Rerunning the same command resumes: committed episodes are skipped.
SIGINT/SIGTERM stop cleanly. One collector per --out.
"""

SETUP_HINT = "install it with `apt-get install chromium` (or `make setup`); never `playwright install`"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.web",
        description="Record web (accessibility-tree) trajectories with headless Chromium browsers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fleet_arguments(parser, sandboxes_alias="--browsers")  # one browser per sandbox
    web = parser.add_argument_group("web sandbox")
    web.add_argument(
        "--backend", choices=("chromium", "simulator"), default="chromium",
        help="headless Chromium, or a world model that answers instead (needs --model-endpoint) (chromium)",
    )  # fmt: skip
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
    args = parser.parse_args(argv)
    if args.start_urls and args.tasks:
        parser.error("--start-urls and --tasks are alternatives: give one")
    validate_counts(parser, args)
    return args


def web_tasks(args: argparse.Namespace) -> list[TaskSpec]:
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


def check_browser(args: argparse.Namespace) -> None:
    """Say how to get Chromium and Playwright instead of failing in every worker. The simulator
    needs no browser, but the web package it reads actions with imports Playwright."""
    if not simulated(args) and not os.path.isfile(args.chromium):
        raise CliError(f"Chromium not found at {args.chromium}: {SETUP_HINT}")
    try:
        import playwright  # noqa: F401
    except ImportError as exc:
        raise CliError("the web collector needs Playwright: pip install 'agentworld-data[web]'") from exc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def run() -> int:
        check_browser(args)
        from sandboxes.web.actions import parse_action

        with open_output(args.out) as lock:
            tasks = web_tasks(args)
            policy = policy_factory(
                args, tasks, parse_action=parse_action, explorer=lambda: WebExplorer(parse_action)
            )
            if simulated(args):
                code = run_cli(args, "web", simulator_sandboxes(args, "web"), policy, lock)
                return code or all_failed_code(args.out)
            from sandboxes.web import WebConfig, WebSandbox, start_sites_server

            # One server for the embedded sites, shared by every browser of the fleet: each
            # episode's fresh browser context has its own cookies, so shop sessions never mix.
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
                code = run_cli(args, "web", lambda: WebSandbox(config), policy, lock)
            return code or all_failed_code(args.out)

    return main_guard(run)


def all_failed_code(out: str) -> int:
    """1 when every episode this run wrote ended in an error (every start URL unreachable, say):
    the run produced nothing usable, and a script calling it must not take that for success."""
    try:
        # Through fsspec: with an s3:// or gs:// --out the summary is in the object store.
        with fsspec.open(posixpath.join(out, "summary.json"), "r") as f:
            outcomes = json.load(f)["outcomes"]
    except (OSError, ValueError, KeyError):
        return 0  # no summary: the runner said what went wrong and chose the exit code
    if outcomes and set(outcomes) == {"error"}:
        print(
            f"every episode ended in an error ({outcomes['error']}): see the outcomes in {out}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

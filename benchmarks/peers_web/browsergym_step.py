"""BrowserGym's `BrowserEnv.step` timed on link clicks; runs inside the BrowserGym venv only.

Started by benchmarks/web_latency.py as a subprocess with the venv's interpreter (BrowserGym pins
Playwright 1.44, which cannot share the project venv). Prints one JSON object on stdout.

BrowserGym cannot launch Debian's Chromium as it ships: it rejects `args` in `pw_chromium_kwargs`,
and its chat window launches a second browser with no executable path at all. So this script
patches Playwright's `BrowserType.launch` at run time to add `executable_path` and our flags to
every launch (both browsers). That is fine for a benchmark and would not be for a product.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

from playwright.sync_api._generated import BrowserType


def patch_launch(executable: str, flags: list[str]) -> None:
    original = BrowserType.launch

    def launch(self: BrowserType, **kwargs: object) -> object:
        kwargs["executable_path"] = executable
        kwargs["args"] = list(kwargs.get("args") or []) + flags  # type: ignore[call-overload]
        return original(self, **kwargs)

    BrowserType.launch = launch  # type: ignore[method-assign]


def bid_of_link(page: object, name: str) -> str:
    """The bid BrowserGym marked on the link, read from the DOM outside the timed step."""
    # By the link's text, not get_by_role: Playwright 1.44's role engine finds no link named
    # "next" on the Python docs pages (it does on the shop), whatever the timeout.
    text = re.compile(f"^\\s*{re.escape(name)}\\s*$")
    link = page.locator("a").filter(has_text=text).first  # type: ignore[attr-defined]
    bid = link.get_attribute("bid", timeout=60_000)  # a loaded machine: the lookup is not timed
    if not bid:
        raise SystemExit(f"BrowserGym marked no bid on link {name!r} at {page.url}")  # type: ignore[attr-defined]
    return bid


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start-url", required=True)
    parser.add_argument("--links", required=True, help="JSON list of link names, clicked in turn")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--slow-mo", type=int, default=None, help="None keeps the task's default")
    parser.add_argument("--pre-observation-delay", type=float, default=None)
    parser.add_argument("--executable", default="/usr/bin/chromium")
    parser.add_argument("--flags", default="[]", help="JSON list of Chromium flags")
    args = parser.parse_args()
    patch_launch(args.executable, json.loads(args.flags))

    from browsergym.core.env import BrowserEnv
    from browsergym.core.task import OpenEndedTask
    from browsergym.utils.obs import flatten_axtree_to_str

    options: dict = {}
    if args.slow_mo is not None:
        options["slow_mo"] = args.slow_mo
    if args.pre_observation_delay is not None:
        options["pre_observation_delay"] = args.pre_observation_delay
    env = BrowserEnv(task_entrypoint=OpenEndedTask, task_kwargs={"start_url": args.start_url}, **options)
    links = json.loads(args.links)
    steps, flatten, tree_chars, errors, failed = [], [], [], [], []
    try:
        env.reset(seed=0)
        for n in range(args.warmup + args.steps):
            before = env.page.url
            action = f"click('{bid_of_link(env.page, links[n % len(links)])}')"
            t0 = time.perf_counter()
            obs, *_ = env.step(action)
            t1 = time.perf_counter()
            text = flatten_axtree_to_str(obs["axtree_object"])
            t2 = time.perf_counter()
            # BrowserGym's actions carry a 500 ms timeout that also covers "waiting for scheduled
            # navigations to finish": on a loaded machine a click that did navigate can report a
            # TimeoutError. Such a step did its work and is timed; a click that did not navigate is not.
            if env.page.url == before:
                failed.append(obs["last_action_error"] or "no navigation")
                continue
            if obs["last_action_error"]:
                errors.append(obs["last_action_error"].splitlines()[0])
            if n >= args.warmup:
                steps.append(t1 - t0)
                flatten.append(t2 - t1)
                tree_chars.append(len(text))
    finally:
        env.close()
    json.dump(
        {
            "step_s": steps,
            "flatten_s": flatten,
            "tree_chars": tree_chars,
            "errors_after_navigating": errors,
            "failed": [f.splitlines()[0] for f in failed],
            "slow_mo": args.slow_mo,
            "pre_observation_delay": args.pre_observation_delay,
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

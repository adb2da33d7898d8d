"""`python -m sandboxes.android install`: install the pinned Appium server and drivers into the cache."""

from __future__ import annotations

import sys
import time

from sandboxes.android import install
from sandboxes.base import SandboxError
from schemas.cli import command_parser, subcommands

EXAMPLES = f"""examples:
  # Appium {install.APPIUM_VERSION} and {install.FAKE_DRIVER}; a no-op when they are installed
  python -m sandboxes.android install
  # also the UiAutomator2 driver, for real emulators and devices
  python -m sandboxes.android install --uiautomator2
  # into a cache of your choice
  AGENTWORLD_CACHE_DIR=/data/cache python -m sandboxes.android install

Appium goes to $AGENTWORLD_CACHE_DIR/appium (default ~/.cache/agentworld/appium), its drivers to
APPIUM_HOME=<that>/home. Needs node 20.19+ and npm, and the npm registry (about 2 minutes the first time).
"""


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(
        "python -m sandboxes.android",
        "Install the Appium server and drivers the Android sandbox runs.",
        EXAMPLES,
    )
    add = subcommands(parser).add_parser("install", help="install Appium and drivers")
    add.add_argument(
        "--uiautomator2",
        action="store_true",
        help=f"also install {install.UIAUTOMATOR2_DRIVER} (only useful with a real emulator or device)",
    )
    args = parser.parse_args(argv)
    began = time.monotonic()
    print(f"Appium {install.APPIUM_VERSION} in {install.appium_root()}: adding what is missing", flush=True)
    try:
        did = install.install(uiautomator2=args.uiautomator2)
    except SandboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    have = ", ".join(f"{name} {version}" for name, version in install.installed().items())
    state = f"installed in {time.monotonic() - began:.0f} s" if did else "already installed"
    print(f"done: {state}: {have} (APPIUM_HOME={install.appium_home()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

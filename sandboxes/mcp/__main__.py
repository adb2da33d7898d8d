"""`python -m sandboxes.mcp install`: install catalogue servers from PyPI and npm into the cache."""

from __future__ import annotations

import sys
import time

from sandboxes.base import SandboxError
from sandboxes.mcp import install
from sandboxes.mcp.catalogue import CatalogueError, embedded_catalogue, load_catalogue
from schemas.cli import command_parser, subcommands

EXAMPLES = """examples:
  # every embedded server (time, git, fetch, filesystem, memory); a no-op when they are installed
  python -m sandboxes.mcp install
  # two of them
  python -m sandboxes.mcp install time memory
  # the packaged servers of your own catalogue, into a cache of your choice
  AGENTWORLD_CACHE_DIR=/data/cache python -m sandboxes.mcp install --servers my-servers.toml

Servers go to $AGENTWORLD_CACHE_DIR/mcp-servers (default ~/.cache/agentworld/mcp-servers): one
virtual environment per PyPI package, one npm prefix per npm package.
"""


def main(argv: list[str] | None = None) -> int:
    parser = command_parser(
        "python -m sandboxes.mcp",
        "Install the MCP servers a catalogue names (PyPI or npm packages).",
        EXAMPLES,
    )
    add = subcommands(parser).add_parser("install", help="install servers")
    add.add_argument("names", nargs="*", help="servers to install (default: every packaged one)")
    add.add_argument(
        "--servers", metavar="CATALOGUE", help="a JSON or TOML catalogue (default: the embedded one)"
    )
    args = parser.parse_args(argv)
    try:
        catalogue = load_catalogue(args.servers) if args.servers else embedded_catalogue()
    except CatalogueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    unknown = [name for name in args.names if name not in catalogue]
    if unknown:
        print(
            f"error: not in the catalogue: {', '.join(unknown)} (known: {', '.join(catalogue)})",
            file=sys.stderr,
        )
        return 2
    names = args.names or list(catalogue)
    packaged = [catalogue[name] for name in names if catalogue[name].package]
    installed = present = failed = 0
    print(f"installing {len(packaged)} server(s) into {install.servers_root()}", flush=True)
    for number, entry in enumerate(packaged, start=1):
        began = time.monotonic()
        print(f"[{number}/{len(packaged)}] {entry.name}: {entry.package} ...", end=" ", flush=True)
        try:
            if install.install_package(entry.package):
                installed += 1
                print(f"installed in {time.monotonic() - began:.0f} s", flush=True)
            else:
                present += 1
                print("already installed", flush=True)
        except SandboxError as exc:
            failed += 1
            print(f"FAILED\n  {exc}", flush=True)
    print(f"done: {installed} installed, {present} already there, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

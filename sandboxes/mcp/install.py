"""Installing catalogue servers from PyPI and npm into the cache, and finding their programs.

Each PyPI package gets a virtual environment of its own (`<cache>/mcp-servers/pypi/<name>-<version>`),
because a server may pin an `mcp` version that is not ours; each npm package gets a prefix of its
own (`<cache>/mcp-servers/npm/<name>-<version>`). A finished install writes `installed.json`, so a
second install is a no-op and a half-finished one is redone.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from sandboxes.base import SandboxError
from sandboxes.cache import cache_root, entry_lock
from sandboxes.mcp.catalogue import ServerEntry

log = logging.getLogger(__name__)

MARKER = "installed.json"
# Bumped when the install steps change, so an install made by older steps is redone.
RECIPE = 2
INSTALL_TIMEOUT_S = 900.0


def servers_root() -> Path:
    return cache_root() / "mcp-servers"


def package_dir(package: str) -> Path:
    """Where `package` ("pypi:name==1.2" or "npm:@scope/name@1.2") is installed."""
    registry, _, spec = package.partition(":")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.lstrip("@")).strip("-")
    return servers_root() / registry / slug


def bin_dir(package: str) -> Path:
    if package.startswith("pypi:"):
        return package_dir(package) / "bin"
    return package_dir(package) / "node_modules" / ".bin"


def is_installed(package: str) -> bool:
    try:
        marker = json.loads((package_dir(package) / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("recipe") == RECIPE


def install_package(package: str, timeout_s: float = INSTALL_TIMEOUT_S) -> bool:
    """Install `package` unless it is; True when this call installed it. SandboxError on failure.

    A lock file serialises installs of one package, so parallel sandboxes and the CLI never build
    the same directory at once; the second one waits and finds it installed.
    """
    if is_installed(package):
        return False
    lock = package_dir(package).with_name(package_dir(package).name + ".lock")
    busy = SandboxError(f"another install of {package} held {lock} for {timeout_s:.0f} s")
    with entry_lock(lock, timeout_s, busy):
        if is_installed(package):
            return False
        _install(package, timeout_s)
    return True


def _install(package: str, timeout_s: float) -> None:
    target = package_dir(package)
    shutil.rmtree(target, ignore_errors=True)  # a half-finished earlier attempt
    target.parent.mkdir(parents=True, exist_ok=True)
    registry, _, spec = package.partition(":")
    if registry == "pypi":
        steps = [[sys.executable, "-m", "venv", str(target)]]
        steps.append([str(target / "bin" / "python"), "-m", "pip", "install", "-q", "--no-input", spec])
    elif registry == "npm":
        if shutil.which("npm") is None:
            raise SandboxError(f"cannot install {package}: npm not found (apt-get install nodejs npm)")
        target.mkdir()
        steps = [["npm", "install", "--prefix", str(target), "--no-audit", "--no-fund", "--silent", spec]]
    else:
        raise SandboxError(f"cannot install {package!r}: the package must start with pypi: or npm:")
    for argv in steps:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            shutil.rmtree(target, ignore_errors=True)
            raise SandboxError(f"installing {package} took more than {timeout_s:.0f} s") from None
        if done.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            tail = (done.stderr or done.stdout).strip()[-2000:]
            raise SandboxError(f"installing {package} failed ({' '.join(argv[:3])} ...): {tail}")
    if registry == "pypi":
        _prepare_node_extractor(package, target, timeout_s)
    # World-readable, so a sandboxed server running as an unprivileged user can load it.
    os.chmod(target, 0o755)
    (target / MARKER).write_text(json.dumps({"package": package, "recipe": RECIPE}) + "\n")


# readabilipy (mcp-server-fetch's HTML extractor) runs `npm install` inside its own package on first
# use; in the read-only sandbox that fails and every fetch errors, so it runs at install time instead.
_NODE_EXTRACTOR = "from readabilipy.utils import run_npm_install; run_npm_install()"


def _prepare_node_extractor(package: str, target: Path, timeout_s: float) -> None:
    python = str(target / "bin" / "python")
    probe = subprocess.run([python, "-c", "import readabilipy"], capture_output=True, timeout=timeout_s)
    if probe.returncode != 0 or shutil.which("npm") is None:
        return
    done = subprocess.run([python, "-c", _NODE_EXTRACTOR], capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        raise SandboxError(f"installing {package}: readabilipy's npm install failed: {done.stderr[-2000:]}")


def ensure_installed(entry: ServerEntry) -> None:
    """Install a missing packaged server on first use, with a log line; an error saying what to run."""
    if not entry.package or is_installed(entry.package):
        return
    log.warning("MCP server %r: installing %s into %s (first use)", entry.name, entry.package, servers_root())
    try:
        install_package(entry.package)
    except SandboxError as exc:
        raise SandboxError(
            f"{exc}\nInstall it by hand with: python -m sandboxes.mcp install {entry.name}"
            " (set AGENTWORLD_CACHE_DIR to choose where)"
        ) from None


def resolve_program(entry: ServerEntry, program: str) -> str:
    """The absolute path of `program`: inside the entry's package when it has one, else on PATH."""
    if os.sep in program:
        return program
    if entry.package:
        candidate = bin_dir(entry.package) / program
        if candidate.exists():
            return str(candidate)
    found = shutil.which(program)
    if found is None:
        hint = f" (python -m sandboxes.mcp install {entry.name})" if entry.package else ""
        raise SandboxError(f"MCP server {entry.name!r}: program {program!r} not found{hint}")
    return found


def python_home() -> Path:
    """The base interpreter's prefix, which packaged Python servers' virtual environments link to."""
    return Path(sys.base_prefix).resolve()

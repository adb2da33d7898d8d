"""What a reset puts in a server's private workdir, and the local site the fetch server reads.

Everything here is deterministic: the same files, the same commits (fixed author and dates, so
the same SHAs) and the same pages at every reset, so replays of an episode see the same world.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sandboxes.base import SandboxError
from sandboxes.http_server import LocalHTTPServer, Request, Response
from sandboxes.mcp.catalogue import GIT_IDENTITY

FILES = {
    "README.md": "# Notes\n\nA small workspace with a few text files.\n",
    "notes/todo.txt": "buy milk\nwrite the report\ncall the plumber\n",
    "notes/ideas.md": "- a garden on the roof\n- a bicycle rack\n",
    "data/numbers.csv": "name,value\nalpha,1\nbeta,2\ngamma,3\n",
}
# The repository the git server works on: three commits, each a file a step further.
GIT_COMMITS = [
    ("Add the README", {"README.md": "# calc\n\nA tiny calculator.\n"}),
    ("Add add()", {"calc.py": "def add(a, b):\n    return a + b\n"}),
    ("Add sub()", {"calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"}),
]
GIT_TIMEOUT_S = 30.0


def seed_workdir(kind: str, workdir: Path) -> None:
    if kind == "files":
        _write(workdir, FILES)
    elif kind == "git":
        seed_git(workdir)


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def seed_git(workdir: Path) -> None:
    """A repository on branch main with GIT_COMMITS and an uncommitted change to calc.py."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(workdir), **GIT_IDENTITY}
    env["GIT_CONFIG_NOSYSTEM"] = "1"

    def git(*args: str, date: str = "") -> None:
        dated = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date} if date else {}
        done = subprocess.run(
            ["git", "-C", str(workdir), *args],
            env={**env, **dated},
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
        )
        if done.returncode != 0:
            raise SandboxError(f"preparing the git server's repository: git {args[0]} failed: {done.stderr}")

    git("init", "-q", "-b", "main")
    for day, (message, files) in enumerate(GIT_COMMITS, start=1):
        _write(workdir, files)
        git("add", "-A")
        git("commit", "-q", "-m", message, date=f"2024-01-0{day}T12:00:00+00:00")
    (workdir / "calc.py").write_text(
        (workdir / "calc.py").read_text() + "\n\ndef mul(a, b):\n    return a * b\n"
    )


PAGES = {
    "/": (
        "<html><head><title>Local library</title></head><body><h1>Local library</h1>"
        '<p>Welcome. See the <a href="/books/">books</a> and the <a href="/hours.html">opening hours</a>.</p>'
        "</body></html>"
    ),
    "/books/": (
        "<html><head><title>Books</title></head><body><h1>Books</h1><ul>"
        '<li><a href="/books/1.html">The River</a> (1952)</li>'
        '<li><a href="/books/2.html">Stone Garden</a> (1987)</li>'
        "</ul></body></html>"
    ),
    "/books/1.html": "<html><body><h1>The River</h1><p>A novel about a long summer.</p></body></html>",
    "/books/2.html": "<html><body><h1>Stone Garden</h1><p>Essays on patience and rock.</p></body></html>",
    "/hours.html": "<html><body><h1>Opening hours</h1><p>Monday to Friday, 9:00 to 17:00.</p></body></html>",
}


def _site(request: Request) -> Response:
    if request.path == "/data.json":
        return Response(200, '{"books": 2, "open": true}', "application/json")
    page = PAGES.get(request.path)
    if page is None:
        return Response(404, f"<html><body><h1>404 Not Found</h1><p>{request.path}</p></body></html>")
    return Response(200, page)


def start_site() -> LocalHTTPServer:
    """The embedded site on a free loopback port; the caller closes it."""
    return LocalHTTPServer({"/": _site}).start()

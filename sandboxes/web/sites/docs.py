"""The docs site: Debian's python3-doc HTML (530 pages of the Python documentation), served as is."""

from __future__ import annotations

from pathlib import Path

from sandboxes.http_server import App, Request, Response, static_app

DOCS_ROOT = Path("/usr/share/doc/python3.11/html")


def docs_app(root: Path = DOCS_ROOT) -> App:
    """The documentation under `root`, or a page that says how to install it."""
    if (root / "index.html").is_file():
        return static_app(root)

    def missing(request: Request) -> Response:
        return Response(
            503,
            f"<!DOCTYPE html><html><head><title>Documentation not installed</title></head><body>"
            f"<h1>Documentation not installed</h1><p>{root} is missing. Install it with "
            "<code>apt-get install python3-doc</code> and restart the collector.</p></body></html>",
        )

    return missing

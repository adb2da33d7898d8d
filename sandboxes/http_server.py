"""A real HTTP server on the loopback interface, in a background thread, for the embedded sites the
web and search sandboxes browse (and for tests that need a server of their own).

Sites are mounted by path prefix: a static directory, or a handler function for a stateful app.
Binding port 0 lets the kernel pick a free port, so parallel collectors and tests never collide.
"""

from __future__ import annotations

import mimetypes
import posixpath
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Request:
    method: str
    path: str  # below the mount point, always starting with "/"
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    host: str  # the Host header without the port: sites may be told apart by host name


@dataclass
class Response:
    status: int = 200
    body: bytes | str = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


App = Callable[[Request], Response]


def static_app(root: str | Path) -> App:
    """Serve files under `root`; `/dir/` serves `dir/index.html`; anything outside `root` is a 404."""
    base = Path(root).resolve()

    def serve(request: Request) -> Response:
        relative = posixpath.normpath(urllib.parse.unquote(request.path)).lstrip("/")
        target = (base / relative).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_relative_to(base) or not target.is_file():
            return Response(404, f"<h1>404 Not Found</h1><p>{request.path}</p>")
        media = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if media.startswith("text/"):
            media += "; charset=utf-8"
        return Response(200, target.read_bytes(), media)

    return serve


class LocalHTTPServer:
    """`with LocalHTTPServer({"/": app}) as server: server.url("/page")`."""

    def __init__(self, mounts: dict[str, App], host: str = "127.0.0.1", port: int = 0) -> None:
        # Longest prefix first, so "/docs/" wins over "/".
        self.mounts = sorted(mounts.items(), key=lambda item: len(item[0]), reverse=True)
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def alive(self) -> bool:
        """True while the serving thread runs (started and not closed)."""
        return self._thread is not None and self._thread.is_alive()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> LocalHTTPServer:
        if self._thread is None:
            # A short poll interval: close() waits for the serving loop's next poll.
            self._thread = threading.Thread(
                target=self._server.serve_forever, args=(0.05,), daemon=True, name="http"
            )
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> LocalHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def dispatch(self, request: Request) -> Response:
        for prefix, app in self.mounts:
            if request.path == prefix.rstrip("/") or request.path.startswith(prefix):
                inner = "/" + request.path[len(prefix) :].lstrip("/")
                return app(Request(**{**request.__dict__, "path": inner}))
        return Response(404, f"<h1>404 Not Found</h1><p>{request.path}</p>")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    method=self.command,
                    path=url.path or "/",
                    query=urllib.parse.parse_qs(url.query, keep_blank_values=True),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                    host=(self.headers.get("Host") or "").rsplit(":", 1)[0],
                )
                try:
                    response = server.dispatch(request)
                except Exception as exc:  # a broken app answers 500; the server keeps serving
                    response = Response(500, f"<h1>500 Internal Server Error</h1><p>{exc}</p>")
                body = response.body.encode() if isinstance(response.body, str) else response.body
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_POST = do_HEAD = _handle

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
                pass  # a collector's stderr is for progress and errors, not access logs

        return Handler

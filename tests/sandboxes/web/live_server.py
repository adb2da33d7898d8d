"""A real threaded HTTP server for the web tests that need more than request -> response: an SSE
stream, a WebSocket endpoint (RFC 6455 handshake and text frames, stdlib only), a page that never
finishes loading, one that answers late, a redirect, and whatever fixed pages a test mounts.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
STREAM_GAP_S = 0.3
LATE_S = 4.0


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A browser that resets a kept-alive connection (a cancelled download, a closed page) is
        not an error of the test's; anything else is printed as usual."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LiveServer:
    def __init__(self, pages: dict[str, str] | None = None) -> None:
        self.pages = dict(pages or {})
        self.hits: list[str] = []  # every path asked for, in order
        self.sent: list[tuple[str, float]] = []  # (message, time sent) of streams and sockets
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                server.hits.append(self.path)
                try:
                    self._answer(urllib.parse.urlsplit(self.path).path)
                except OSError:
                    pass  # the browser went away mid-stream: the test has what it needs

            def _answer(self, path: str) -> None:
                if path == "/events":
                    server._sse(self)
                elif path == "/ws":
                    server._websocket(self)
                elif path == "/stalled":
                    server._stalled(self)
                elif path == "/late":
                    server._late(self)
                elif path == "/trickle.bin":
                    server._trickle(self)
                elif path == "/hop":  # redirects wherever ?to= says
                    target = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["to"][0]
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif path in server.pages:
                    body = server.pages[path].encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                else:
                    self.send_error(404)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    @property
    def origin(self) -> str:
        return self.url("").rstrip("/")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _sse(self, handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.end_headers()
        for n in range(1, 6):
            message = f"event {n}"
            handler.wfile.write(f"data: {message}\n\n".encode())
            handler.wfile.flush()
            self.sent.append((message, time.monotonic()))
            time.sleep(STREAM_GAP_S)
        time.sleep(30)  # the stream stays open, as real ones do; the browser closes it

    def _websocket(self, handler: BaseHTTPRequestHandler) -> None:
        key = handler.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        handler.send_response(101)
        handler.send_header("Upgrade", "websocket")
        handler.send_header("Connection", "Upgrade")
        handler.send_header("Sec-WebSocket-Accept", accept)
        handler.end_headers()
        handler.wfile.flush()
        for n in range(1, 4):
            message = f"socket {n}"
            payload = message.encode()
            handler.wfile.write(struct.pack("!BB", 0x81, len(payload)) + payload)
            handler.wfile.flush()
            self.sent.append((message, time.monotonic()))
            time.sleep(STREAM_GAP_S)
        time.sleep(30)

    def _late(self, handler: BaseHTTPRequestHandler) -> None:
        """A page that answers only after LATE_S: a navigation to it outlasts the settle bound."""
        time.sleep(LATE_S)
        body = b"<!DOCTYPE html><title>Late page</title><h1>Late but here</h1>"
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _trickle(self, handler: BaseHTTPRequestHandler) -> None:
        """A download that announces 1 MB and sends 10 bytes a second of it."""
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Disposition", "attachment; filename=trickle.bin")
        handler.send_header("Content-Length", str(1 << 20))
        handler.end_headers()
        for _ in range(60):
            handler.wfile.write(b"x" * 10)
            handler.wfile.flush()
            time.sleep(1.0)

    def _stalled(self, handler: BaseHTTPRequestHandler) -> None:
        """A page whose first part arrives at once and whose end never does."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.end_headers()
        handler.wfile.write(b"<!DOCTYPE html><title>Half a page</title><h1>The first half arrived</h1>")
        handler.wfile.flush()
        time.sleep(30)


@contextmanager
def live_server(pages: dict[str, str] | None = None) -> Iterator[LiveServer]:
    server = LiveServer(pages)
    try:
        yield server
    finally:
        server.close()


# A page that lists, one item per message, what an EventSource and a WebSocket deliver.
STREAMS_PAGE = """<!DOCTYPE html><title>Streams</title><ul id="log"></ul><script>
const log = text => { const li = document.createElement('li'); li.textContent = text; log_.append(li); };
const log_ = document.getElementById('log');
new EventSource('/events').onmessage = e => log(`sse: ${e.data} at ${Math.round(performance.now())}`);
const params = new URLSearchParams(location.search);
const socket = new WebSocket(params.get('ws') || `ws://${location.host}/ws`);
socket.onmessage = e => log(`ws: ${e.data} at ${Math.round(performance.now())}`);
socket.onerror = () => log('ws: error');
</script>"""

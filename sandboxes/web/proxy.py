"""The network floor of the origin guard: a proxy that every browser context must use for the
origins its task does not allow (allowed origins bypass it), and that refuses every connection.

Why a proxy: Playwright's routing sees the first request of each HTTP chain only. Redirect hops
are followed by the browser unasked, and WebSockets, workers' requests and beacons pass beside
it. Chromium sends every one of those through its proxy settings, so the proxy sees them all. It
forwards nothing: it reads the request head, notes what was asked (the URL of a plain-http request,
host:port of a CONNECT tunnel, which carries https and WebSockets) and refuses. Allowed traffic
goes straight to its server and streams as it would without the sandbox.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from dataclasses import dataclass

HEAD_LIMIT = 64 * 1024
READ_TIMEOUT_S = 5.0
REFUSAL = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass(frozen=True)
class Refused:
    target: str  # "http://host/path" for plain http; "host:port" for a CONNECT tunnel
    tunnel: bool


def _request_line(connection: socket.socket) -> str:
    head = b""
    while b"\r\n" not in head and len(head) < HEAD_LIMIT:
        chunk = connection.recv(4096)
        if not chunk:
            break
        head += chunk
    return head.split(b"\r\n", 1)[0].decode("latin-1")


class RefusingProxy:
    """`proxy.server` goes into a context's proxy settings; `drain()` returns what was refused
    since the last call."""

    def __init__(self) -> None:
        self._refused: list[Refused] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(READ_TIMEOUT_S)
                try:
                    parts = _request_line(self.request).split()
                    if len(parts) >= 2:
                        proxy._note(Refused(parts[1], parts[0].upper() == "CONNECT"))
                    self.request.sendall(REFUSAL)
                except OSError:
                    pass  # the browser gave up first: nothing was forwarded either way

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="web-refusing-proxy")
        self._thread.daemon = True
        self._thread.start()

    @property
    def server(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _note(self, refused: Refused) -> None:
        with self._lock:
            self._refused.append(refused)

    def drain(self) -> list[Refused]:
        with self._lock:
            refused, self._refused = self._refused, []
        return refused

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

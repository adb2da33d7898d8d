"""The network floor of the origin guard: a proxy that every browser context must use for the
origins its task does not allow (allowed origins bypass it), and that refuses every connection.

Why a proxy: Chromium sends every request through its proxy settings, redirect hops, WebSockets,
workers' requests and beacons included, so a proxy that forwards nothing covers them all, outside
the page's reach. It reads the request head and refuses: a CONNECT tunnel (https, WebSockets) gets
a 403, which Chromium reports as a failed tunnel; a plain-http request gets its connection closed
unanswered, so that it fails as a network error (an answer, even a 403, would reach the page as a
response). Allowed traffic goes straight to its server and streams as it would without the sandbox.
"""

from __future__ import annotations

import socket
import socketserver
import threading

HEAD_LIMIT = 64 * 1024
READ_TIMEOUT_S = 5.0
TUNNEL_REFUSAL = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def _request_line(connection: socket.socket) -> str:
    head = b""
    while b"\r\n" not in head and len(head) < HEAD_LIMIT:
        chunk = connection.recv(4096)
        if not chunk:
            break
        head += chunk
    return head.split(b"\r\n", 1)[0].decode("latin-1")


class _Refuse(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(READ_TIMEOUT_S)
        try:
            if _request_line(self.request).upper().startswith("CONNECT "):
                self.request.sendall(TUNNEL_REFUSAL)
        except OSError:
            pass  # the browser gave up first: nothing was forwarded either way


class RefusingProxy:
    """`proxy.server` goes into a context's proxy settings."""

    def __init__(self) -> None:
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Refuse)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="web-refusing-proxy")
        self._thread.daemon = True
        self._thread.start()

    @property
    def server(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

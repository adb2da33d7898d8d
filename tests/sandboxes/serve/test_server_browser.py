"""The attack as it was reproduced: a page from another origin, open in the operator's real Chromium,
aims at a server on 127.0.0.1 that runs without a token (the weakest configuration: `--no-token`). It
opens `ws://127.0.0.1:PORT/ws` and POSTs a step as text/plain (no CORS preflight); a page on a
rebound name (attacker.example -> 127.0.0.1, Chromium's own host resolver rules) calls the server
under that name. Every attempt is refused; no session is opened and no step runs."""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

import pytest
from playwright.sync_api import sync_playwright

from sandboxes.serve.server import build_app
from sandboxes.tasks import embedded_tasks
from tests.sandboxes.serve.conftest import Recorder, call, pool_of, serving

pytestmark = [pytest.mark.chromium, pytest.mark.bwrap, pytest.mark.tmux]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]  # fmt: skip

# The attacker's page: each attempt reports what the page could see; the server's side is checked too.
ATTACK = """
async ({server, session}) => {
  const results = {};
  results.ws = await new Promise((resolve) => {
    const ws = new WebSocket(server.replace("http", "ws") + "/ws");
    ws.onopen = () => {
      ws.send(JSON.stringify({type: "reset", data: {}}));
      ws.onmessage = () => {
        ws.send(JSON.stringify({type: "step", data: {kind: "command", arguments: {command: "touch pwned"}}}));
        resolve("opened and ran a command");
      };
    };
    ws.onerror = () => resolve("refused");
    setTimeout(() => resolve("timeout"), 10000);
  });
  const step = JSON.stringify({action: {kind: "command", arguments: {command: "touch pwned"}}});
  for (const [name, path, body] of [["step", `/sessions/${session}/step`, step], ["open", "/sessions", ""]]) {
    try {
      const r = await fetch(server + path, {method: "POST", mode: "no-cors",
                                            headers: {"Content-Type": "text/plain"}, body});
      results[name] = "sent (opaque " + r.type + ")";
    } catch (e) {
      results[name] = "failed: " + e;
    }
  }
  return results;
}
"""


@contextmanager
def attacker_site() -> Iterator[int]:
    """A plain page on another port of this machine: another origin than the server's."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = b"<html><body>cute cats</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield site.server_address[1]
    finally:
        site.shutdown()
        site.server_close()


@pytest.fixture
def recorder(recorder: Recorder) -> Recorder:
    """The terminal sandboxes the browser's page would drive, once Chromium is there."""
    if not os.path.exists(CHROMIUM):
        pytest.fail("Chromium is missing: apt-get install chromium (never `playwright install`)")
    return recorder


def test_a_page_from_another_origin_cannot_drive_a_tokenless_server(recorder: Recorder) -> None:
    tasks = [s.task for s in embedded_tasks("terminal")]
    app = build_app(recorder, tasks, domain="terminal", max_sessions=3)  # no token at all
    pool = pool_of(app)
    with serving(app) as url, attacker_site() as site_port, sync_playwright() as playwright:
        port = urlparse(url).port
        # The operator's own session, which the page tries to step into (its id guessed or leaked).
        session = call("POST", f"{url}/sessions")[1]["session_id"]
        assert call("POST", f"{url}/sessions/{session}/reset", {"task_id": "files-create-notes"})[0] == 200
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[*ARGS, "--host-resolver-rules=MAP attacker.example 127.0.0.1"],
        )
        try:
            page = browser.new_page()
            statuses: dict[str, int] = {}
            page.on("response", lambda r: statuses.__setitem__(urlparse(r.url).path, r.status))
            # 1. Another origin (another port of 127.0.0.1), the server by its own address.
            page.goto(f"http://127.0.0.1:{site_port}/")
            seen = page.evaluate(ATTACK, {"server": url, "session": session})
            assert seen["ws"] == "refused", seen
            assert statuses.get(f"/sessions/{session}/step") == 403, statuses
            assert statuses.get("/sessions") == 403, statuses
            # 2. DNS rebinding: the attacker's name now resolves to 127.0.0.1.
            rebound = f"http://attacker.example:{port}"
            statuses.clear()
            page.goto(f"http://attacker.example:{site_port}/")
            seen = page.evaluate(ATTACK, {"server": rebound, "session": session})
            assert seen["ws"] == "refused", seen
            assert statuses.get(f"/sessions/{session}/step") == 421, statuses
            assert statuses.get("/sessions") == 421, statuses
            # Even as a top-level page of that name (same-origin with itself), nothing answers.
            answer = page.goto(f"{rebound}/health")
            assert answer is not None and answer.status == 421
            assert "DNS rebinding" in json.loads(answer.text())["detail"]
        finally:
            browser.close()
        assert pool.active_sessions == 1 and app.state.stats.counts["opened"] == 1, "the page opened one"
        state = call("GET", f"{url}/sessions/{session}/state")[1]
        assert state["step_count"] == 0, "a step from the page ran"
        status, seen = call(
            "POST",
            f"{url}/sessions/{session}/step",
            {"action": {"kind": "command", "arguments": {"command": "ls pwned"}}},
        )
        assert status == 200 and "No such file" in seen["observation"]["text"]

"""DesktopSandbox: a real Linux desktop (Xvfb, openbox, AT-SPI, real applications) driven through
the guest agent (guest/agent.py) over a transport: a local bubblewrap sandbox by default, or an
SSH host or a QEMU VM given by the caller.

A reset restarts the task's applications in the running session (the X server and the buses stay
up, the private home is emptied and refilled with the task's files); a guest that died or hung is
replaced at the next start or reset. An episode's step raises SandboxCrashedError when the guest is
gone, and an InvalidActionError for a malformed action; an action that cannot be done (a click on
the empty desktop, an exception in the pyautogui code) is an observation whose first line is
`Error: ...`.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from pathlib import Path
from typing import Any

from sandboxes.base import (
    Sandbox,
    SandboxClosedError,
    SandboxCrashedError,
    SandboxError,
    StepResult,
    VerifierError,
)
from sandboxes.desktop.actions import parse_action
from sandboxes.desktop.config import APPLICATIONS, DesktopConfig
from sandboxes.desktop.transport import Channel, Transport
from sandboxes.desktop.tree_text import parse_tree
from sandboxes.desktop.verify import KIND as STATE_VERIFIER
from sandboxes.desktop.verify import evaluate, file_paths, needs_tree, parse_checks
from schemas.records import Action, Attachment, Environment, Observation, Step, Task, Verification

log = logging.getLogger(__name__)

# The Linux guest program: agent.py and the modules it imports, copied side by side into the target's
# workdir (windows_agent.py is a separate program for Windows targets).
GUEST_FILES = tuple(
    sorted(p for p in (Path(__file__).parent / "guest").glob("*.py") if p.name != "windows_agent.py")
)
OBSERVATION_FORMAT = "desktop_a11y_tree"
# Beyond an operation's own bounds (actions, settling, app start), time for the reply to travel.
REPLY_MARGIN_S = 30.0
# What a verifier reads: the whole tree (no agent sees it, so no cut) and a file's head.
VERIFY_MAX_NODES = 5000
VERIFY_MAX_FILE_BYTES = 65536


class DesktopSandbox(Sandbox):
    domain = "os"

    def __init__(self, config: DesktopConfig | None = None, transport: Transport | None = None) -> None:
        self.config = config or DesktopConfig()
        self._given = transport  # an SSH or VM transport; None: a local bubblewrap sandbox per start
        self._transport: Transport | None = None
        self._channel: Channel | None = None
        self._ready: dict[str, Any] = {}
        self._started = False
        self._closed = False
        self._spawns = 0
        self._resets = 0
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._started and not self._closed and self._channel is not None and self._channel.alive():
                return
            self._closed = False
            self._started = True
            self._boot()

    def _boot(self) -> None:
        """(Re)start the guest: the old one, if any, is killed first."""
        self._drop_guest()
        if self._transport is None:
            if self._given is not None:
                self._transport = self._given
            else:
                from sandboxes.desktop.local import LocalTransport  # noqa: PLC0415 - only the local backend needs bwrap

                self._transport = LocalTransport(self.config.local_limits)
        transport = self._transport
        self._spawns += 1
        remote = upload_guest(transport)
        session_dir = f"{transport.workdir().rstrip('/')}/session-{self._spawns}"
        argv = [self.config.python, remote, "--workdir", session_dir, *self.config.guest_args()]
        self._channel = channel = transport.spawn(argv, {})
        try:
            first = json.loads(channel.recv_line(self.config.start_timeout))
        except TimeoutError as exc:
            self._drop_guest()
            raise SandboxError(f"desktop guest did not start within {self.config.start_timeout:g}s") from exc
        except SandboxCrashedError as exc:
            self._drop_guest()
            raise SandboxError(f"desktop guest could not start: {exc}") from exc
        if not first.get("ok"):
            self._drop_guest()
            raise SandboxError(f"desktop guest could not start: {first.get('error')}")
        self._ready = first["ready"]

    def _drop_guest(self) -> None:
        if self._channel is not None:
            self._channel.kill()
            self._channel = None
        if self._given is None and self._transport is not None:
            self._transport.close()  # a fresh local sandbox per guest: nothing of the old one survives
            self._transport = None

    def close(self) -> None:
        with self._lock:
            if self._closed or not self._started:
                self._closed = True
                return
            self._closed = True
            if self._channel is not None and self._channel.alive():
                try:
                    self._channel.send_line(json.dumps({"op": "shutdown"}))
                    self._channel.recv_line(5.0)
                except (SandboxError, TimeoutError, ValueError):
                    pass
            self._drop_guest()
            if self._transport is not None:  # a given transport is ours to close too
                self._transport.close()
                self._transport = None

    @property
    def alive(self) -> bool:
        return self._started and not self._closed and self._channel is not None and self._channel.alive()

    def resources(self) -> list[str]:
        return self._transport.resources() if self._transport is not None else []

    def describe(self) -> Environment:
        cfg = self.config
        kind = (
            self._transport.kind
            if self._transport is not None
            else (self._given.kind if self._given else "local")
        )
        config = {
            "width": cfg.width,
            "height": cfg.height,
            "max_nodes": cfg.max_nodes,
            "screenshot": cfg.screenshot,
            "settle_timeout": cfg.settle_timeout,
            "restore_machine": cfg.restore_machine,
            "applications": list(APPLICATIONS),
        }
        return Environment(name="os", backend=kind, config=config)

    # -- episodes --------------------------------------------------------------------------------

    def reset(self, task: Task) -> Observation:
        if self._closed and self._started:
            raise SandboxClosedError("desktop sandbox is closed")
        if not self._started or self._channel is None or not self._channel.alive():
            with self._lock:
                self._started, self._closed = True, False
                self._boot()
        meta = task.metadata or {}
        apps = list(meta.get("apps") or self.config.default_apps)
        files = dict(meta.get("files") or {})
        if task.setup:
            raise SandboxError(
                "desktop tasks set up through metadata.apps and metadata.files, not shell setup"
            )
        unknown = [a for a in apps if (a.get("name") if isinstance(a, dict) else a) not in APPLICATIONS]
        if unknown:
            raise SandboxError(
                f"task {task.id}: unknown application(s) {unknown}; known: {', '.join(APPLICATIONS)}"
            )
        restore = getattr(self._transport, "restore", None)
        if self.config.restore_machine and restore is not None and self._resets:
            with self._lock:
                self._drop_guest()
                restore()
                self._boot()
        self._resets += 1
        timeout = self.config.app_timeout * max(1, len(apps)) + self.config.settle_timeout + REPLY_MARGIN_S
        return self._observation(self._request({"op": "reset", "apps": apps, "files": files}, timeout))

    def step(self, action: Action) -> StepResult:
        if self._closed or not self._started or self._channel is None:
            raise SandboxClosedError("desktop sandbox is not started or was closed")
        action = parse_action(action.kind, action.arguments)
        request = {"op": "act", "action": {"kind": action.kind, **action.arguments}}
        timeout = self.config.action_timeout + self.config.settle_timeout + REPLY_MARGIN_S
        return StepResult(observation=self._observation(self._request(request, timeout)))

    def observe(self, settle: bool = True) -> Observation:
        """The desktop as it is now, without acting; `settle=False` reads the tree once, without
        waiting for it to stop changing."""
        if self._closed or self._channel is None:
            raise SandboxClosedError("desktop sandbox is not started or was closed")
        request = {"op": "observe", "settle": settle}
        return self._observation(self._request(request, self.config.settle_timeout + REPLY_MARGIN_S))

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        """A `desktop_state` verifier's checks on the desktop as the episode left it: the tree read
        once (the last step already waited for it to settle), the files read through the guest."""
        if task.verifier.get("kind") != STATE_VERIFIER:
            return super().verify(task, steps)
        checks = parse_checks(task.verifier)
        if self._closed or self._channel is None:
            raise SandboxClosedError("desktop sandbox is not started or was closed")
        tree = None
        if needs_tree(checks):
            request = {"op": "observe", "settle": False, "screenshot": False, "max_nodes": VERIFY_MAX_NODES}
            tree = parse_tree(self._request(request, self.config.settle_timeout + REPLY_MARGIN_S)["tree"])
        files: dict[str, Any] = {}
        if paths := file_paths(checks):
            request = {"op": "read_files", "paths": paths, "max_bytes": VERIFY_MAX_FILE_BYTES}
            # A refused read (a path outside the home) is the verifier's fault, not a broken desktop.
            files = self._request(request, REPLY_MARGIN_S, refused=VerifierError)["files"]
        return evaluate(checks, tree, files)

    def _request(
        self, request: dict[str, Any], timeout: float, refused: type[SandboxError] = SandboxCrashedError
    ) -> dict[str, Any]:
        channel = self._channel
        if channel is None or not channel.alive():
            raise SandboxCrashedError("the desktop guest is gone")
        try:
            channel.send_line(json.dumps(request))
            reply = json.loads(channel.recv_line(timeout))
        except TimeoutError as exc:
            channel.kill()  # a hung session is not reused: the next reset starts a fresh one
            raise SandboxCrashedError(f"the desktop did not answer within {timeout:g}s") from exc
        except ValueError as exc:
            channel.kill()
            raise SandboxCrashedError(f"the desktop guest sent a malformed reply: {exc}") from exc
        if not reply.get("ok"):
            raise refused(f"the desktop guest refused the request: {reply.get('error')}")
        return reply

    def _observation(self, reply: dict[str, Any]) -> Observation:
        attachments = []
        if reply.get("screenshot_png_b64"):
            png = base64.b64decode(reply["screenshot_png_b64"])
            attachments.append(Attachment(name="screenshot.png", media_type="image/png", content=png))
        data = {
            "focused": reply.get("focused", "none"),
            "nodes": reply.get("nodes", 0),
            "truncated": bool(reply.get("truncated")),
            "error": reply.get("error", ""),
            "backend": self._transport.kind if self._transport is not None else "local",
        }
        return Observation(
            format=OBSERVATION_FORMAT, text=reply.get("tree", ""), data=data, attachments=attachments
        )


def upload_guest(transport: Transport) -> str:
    """Copy the guest program into the transport's workdir; the path of its agent.py there."""
    workdir = transport.workdir().rstrip("/")
    for path in GUEST_FILES:
        transport.put_file(path, f"{workdir}/{path.name}")
    return f"{workdir}/agent.py"

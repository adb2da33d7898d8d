"""TerminalSandbox: an interactive bash in tmux, isolated by a docker / bwrap / local backend.

Speed: each environment has a private tmux server driven by one control-mode client, and the
shell's prompt carries OSC 133 marks (see shell.py), so a step is one round trip to type, a wait
for the mark, and one round trip to capture the screen. The next environment is booted in the
background while an episode runs, so reset mostly swaps it in.

Observation: the visible screen (what a human would see, prompt included). Output that scrolled
off the screen during a step is counted with tmux's history (cleared at each step start); then
the text starts with a marker line, `output_truncated` is set and the step's whole raw output
(escape sequences stripped, first and last `max_output_bytes / 2` bytes when longer) is attached
as output.txt. A timed-out command is interrupted with C-c and the text ends with a line saying so.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import logging
import os
import re
import shutil
import threading
import time
from datetime import UTC, datetime
from typing import Any

from sandboxes.base import Sandbox, SandboxClosedError, SandboxCrashedError, SandboxError, StepResult
from sandboxes.containment import ProcessBox, sandbox_tmpdir
from sandboxes.terminal.actions import COMMAND, is_key_name, parse_action
from sandboxes.terminal.backends import Instance, bwrap_limits, make_instance
from sandboxes.terminal.check_turns import check_turns
from sandboxes.terminal.config import Backend, BwrapBackend, DockerBackend, LocalBackend, TerminalConfig
from sandboxes.terminal.control import TmuxError, TmuxSession, quote
from sandboxes.terminal.reaper import tmux_socket_path
from sandboxes.terminal.shell import SHELL_RC, ShellStream
from sandboxes.terminal.verify import COMMAND as COMMAND_VERIFIER
from sandboxes.terminal.verify import end_agent, run_checks
from schemas.records import Action, Attachment, Environment, Observation, Step, Task, Verification

log = logging.getLogger(__name__)

BOOT_TIMEOUT = 60.0
# How long each C-c gets to bring the prompt back (a flood like `yes` has a backlog to drain).
INTERRUPT_WAIT = 3.0
# Each step clears the scrollback and notes the cursor row: then the rows of the step's output that
# scrolled off the screen are history_size - start row.
_STEP_START = ("clear-history -t main", "display-message -p -t main '#{cursor_y}'")
_CR_LF = re.compile(rb"\r+\n")
_LINE_START_CR = re.compile(rb"(^|\n)\r+")
_ESCAPES = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]"
)


def _limits(backend: Backend) -> str:
    """How the environment's resources are bounded: "cgroup", "rlimit" or "none" (local)."""
    if isinstance(backend, BwrapBackend):
        try:
            return bwrap_limits(backend)
        except SandboxError:
            return "unavailable"
    return "none" if isinstance(backend, LocalBackend) else "cgroup"


def _plain(raw: bytes) -> bytes:
    """Terminal stream to plain text: escape sequences dropped, CR LF and line-start CRs to LF."""
    return _LINE_START_CR.sub(rb"\1", _CR_LF.sub(b"\n", _ESCAPES.sub(b"", raw)))


def scrolled_off(text: str, hidden: int, raw_output: bytes, at_least: bool = False) -> tuple[str, Attachment]:
    """A screen whose step scrolled `hidden` lines out of view: the note the model sees above it, and
    the step's whole output (escape sequences dropped) as the attachment the note names."""
    count = f"at least {hidden}" if at_least else str(hidden)
    note = f"[... {count} lines of output not shown; full output in attachment output.txt]"
    content = _plain(raw_output)
    attachment = Attachment(
        name="output.txt",
        media_type="text/plain",
        sha256=hashlib.sha256(content).hexdigest(),
        size=len(content),
        content=content,
    )
    return f"{note}\n{text}", attachment


class _Live:
    """One booted environment: the instance, its tmux pane and the pane's output stream."""

    def __init__(self, config: TerminalConfig) -> None:
        tmpdir = sandbox_tmpdir("terminal")
        os.chmod(tmpdir, 0o755)  # the sandbox user must reach the rc file bound from here
        rc_path = os.path.join(tmpdir, "bashrc")
        with open(rc_path, "w") as f:
            f.write(SHELL_RC)
        os.chmod(rc_path, 0o644)
        self.tmux: TmuxSession | None = None
        self.instance: Instance | None = None
        self.box: ProcessBox | None = None
        self.stream = ShellStream(config.max_output_bytes)
        self.start_row = 0
        # Set when a verifier ended the episode: its processes were killed on purpose, which is
        # not a crash; the environment waits for the next reset to be retired.
        self.finished = False
        try:
            # The tmux server and all that the pane starts (a local shell's setsid jobs too).
            self.box = ProcessBox()
            self.instance = make_instance(config.backend, tmpdir, rc_path, self.box)
            self.tmux = TmuxSession(
                self.instance.shell_argv(),
                width=config.width,
                height=config.height,
                history_limit=config.history_limit,
                workdir=self.instance.workdir,
                conf_dir=tmpdir,
                on_output=self.stream.feed,
                on_end=self.stream.end,
                box=self.box,
            )
            if not self.stream.wait_prompt(0, BOOT_TIMEOUT):
                screen = self.screen() if self.stream.ended is None else []
                raise SandboxError(
                    f"terminal shell did not show a prompt ({self.stream.ended or 'timeout'}): "
                    + "\n".join(screen)[-2000:]
                )
        except BaseException:
            self.destroy()
            if self.instance is None:
                shutil.rmtree(tmpdir, ignore_errors=True)
            raise

    def screen(self) -> list[str]:
        assert self.tmux is not None
        lines = self.tmux.run("capture-pane -p -t main")[0]
        while lines and not lines[-1].strip():
            lines.pop()
        return lines

    def resources(self) -> list[str]:
        found = list(self.instance.resources()) if self.instance else []
        if self.box:
            found += self.box.resources()
        if self.tmux:
            found += [
                f"pid:{p}" for p in (self.tmux.server_pid, self.tmux.client_pid, self.tmux.pane_pid) if p
            ]
            found.append(f"path:{tmux_socket_path(self.tmux.socket)}")
        return found

    def destroy(self) -> None:
        if self.tmux is not None:
            self.tmux.kill()
        if self.box is not None:
            self.box.close()
        if self.instance is not None:
            self.instance.destroy()


def _last_screen(steps: list[Step], initial: str) -> str:
    """The pane's last real screen: the last step's that reached it (a refused action shows an error
    observation instead, and changes nothing), else the episode's first."""
    for step in reversed(steps):
        if step.observation.format == "terminal_screen":
            return step.observation.text
    return initial


class TerminalSandbox(Sandbox):
    domain = "terminal"

    def __init__(self, config: TerminalConfig | None = None) -> None:
        self.config = config or TerminalConfig()
        if isinstance(self.config.backend, LocalBackend):
            log.warning("terminal sandbox with the local backend: the host itself is the sandbox")
        self._started = False
        self._closed = False
        self._live: _Live | None = None
        self._spare: cf.Future[_Live] | None = None
        self._retiring: list[cf.Future[None]] = []
        self._pool: cf.ThreadPoolExecutor | None = None
        self._state = threading.Lock()
        self._initial_screen = ""  # the episode's first screen: where checks are shown after no step

    # -- lifecycle -------------------------------------------------------------------------------
    # close() may come from another thread at any moment (a collector stopping on a signal): every
    # change of which environments exist happens under `_state` after a look at `_closed`, so an
    # environment is either one close() destroys or never made.

    def start(self) -> None:
        with self._state:
            if self._started and not self._closed:
                return
            self._closed = False
            self._started = True
            self._pool = cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="terminal-sandbox")
            self._spare = spare = self._pool.submit(_Live, self.config)
        spare.result()  # surface a missing image or a broken backend now, not at reset
        self._check_open()

    def reset(self, task: Task) -> Observation:
        if not self._started:
            self.start()
        with self._state:
            self._check_open()
            spare = self._spare
        assert spare is not None
        live = spare.result()
        with self._state:
            self._check_open()  # closed while booting: close() destroyed `live` with the spare
            assert self._pool is not None
            self._spare = self._pool.submit(_Live, self.config)
            if self._live is not None:
                self._retiring = [f for f in self._retiring if not f.done()]
                self._retiring.append(self._pool.submit(self._live.destroy))
            self._live = live
        try:
            for command in task.setup:
                self._setup(live, task, command)
            if task.setup:
                # Setup output is not part of the episode: start from a clean screen.
                self._command(live, " clear", self.config.setup_timeout)
            live.stream.begin_step()
            initial = self._observe(live, timed_out=False, timeout=0.0, first=True)
            self._initial_screen = initial.text
            return initial
        except TmuxError as exc:
            raise self._crashed(live, exc) from exc

    def step(self, action: Action) -> StepResult:
        live = self._require_live()
        action = parse_action(action.kind, action.arguments)
        if live.finished:
            raise SandboxError(
                "the episode is over: its processes were stopped for the verifier; reset first"
            )
        if live.stream.ended is not None:
            raise self._crashed(live, None)
        try:
            if action.kind == COMMAND:
                timeout = action.arguments.get("timeout") or self.config.command_timeout
                timed_out = self._command(live, action.arguments["command"], timeout)
            else:
                timeout, timed_out = 0.0, False
                self._keystrokes(live, action.arguments["keystrokes"])
            return StepResult(observation=self._observe(live, timed_out=timed_out, timeout=timeout))
        except TmuxError as exc:
            raise self._crashed(live, exc) from exc

    def close(self) -> None:
        """Destroy every environment, booting ones included; safe from any thread, idempotent.
        A sandbox closed this way is not restarted by reset(); start() it again explicitly."""
        with self._state:
            if self._closed or not self._started:
                self._closed = True
                return
            self._closed = True
            live, spare, retiring, pool = self._live, self._spare, self._retiring, self._pool
            self._live, self._spare, self._retiring, self._pool = None, None, [], None
        doomed: list[_Live] = [live] if live else []
        if spare is not None:
            try:
                doomed.append(spare.result())
            except Exception:  # a failed boot cleaned up after itself
                pass
        for each in doomed:
            each.destroy()
        cf.wait(retiring)
        if pool is not None:
            pool.shutdown(wait=True)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError("sandbox is closed; start() it again or create a new one")

    @property
    def alive(self) -> bool:
        if not self._started or self._closed:
            return False
        live = self._live
        return live is None or live.finished or live.stream.ended is None

    def describe(self) -> Environment:
        backend = self.config.backend
        config: dict[str, Any] = {"width": self.config.width, "height": self.config.height}
        config.update(
            cpus=getattr(backend, "cpus", None),
            memory=getattr(backend, "memory", None),
            pids_limit=getattr(backend, "pids_limit", None),
            network=getattr(backend, "network", True),
            limits=_limits(backend),
        )
        if config["limits"] == "rlimit":
            config["cpu_seconds"] = getattr(backend, "cpu_seconds", None)
        image = backend.image if isinstance(backend, DockerBackend) else ""
        if isinstance(backend, DockerBackend) and backend.env:
            config["env"] = list(backend.env)
        return Environment(name="terminal", backend=backend.kind, image=image, config=config)

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        """A `command` verifier: the agent's processes are ended, the checks run trusted
        (verify.run_checks), and each check is also recorded as a verification turn in the form the
        simulated verifier asks it (check_turns.py)."""
        if task.verifier.get("kind") != COMMAND_VERIFIER:
            return super().verify(task, steps)
        started_at, clock = datetime.now(UTC), time.monotonic()
        screen = _last_screen(steps, self._initial_screen)
        live = self._end_episode()
        assert live.instance is not None
        verification = run_checks(live.instance, task.verifier)
        verification.turns = check_turns(
            screen,
            verification.details["checks"],
            width=self.config.width,
            height=self.config.height,
            first_index=len(steps),
            started_at=started_at,
            elapsed_s=time.monotonic() - clock,
        )
        return verification

    def _end_episode(self) -> _Live:
        """Kill everything the agent started, before a verifier reads what it left (see
        verify.end_agent); the environment takes no more steps."""
        live = self._require_live()
        live.finished = True
        assert live.instance is not None
        end_agent(live.instance, live.box)
        return live

    def resources(self) -> list[str]:
        """What this sandbox holds now: "pid:<n>", "container:<id>" and "path:<dir>" strings."""
        found = self._live.resources() if self._live else []
        if self._spare is not None and self._spare.done() and self._spare.exception() is None:
            found += self._spare.result().resources()
        return found

    # -- actions ---------------------------------------------------------------------------------

    def _require_live(self) -> _Live:
        if self._closed or not self._started:
            raise SandboxClosedError("sandbox is closed; create a new one or call reset")
        if self._live is None:
            raise SandboxClosedError("sandbox has no episode yet; call reset first")
        return self._live

    def _crashed(self, live: _Live, exc: Exception | None) -> SandboxError:
        if live.stream.ended is None and exc is not None:
            return SandboxError(f"terminal sandbox: {exc}")
        assert live.instance is not None
        return SandboxCrashedError(f"terminal sandbox crashed: {live.instance.crash_reason()}")

    def _setup(self, live: _Live, task: Task, command: str) -> None:
        # A leading space keeps setup out of the shell history (HISTCONTROL=ignoreboth).
        timed_out = self._command(live, " " + command, self.config.setup_timeout)
        if timed_out or live.stream.exit_code != 0:
            output = live.stream.step.content().decode("utf-8", errors="replace")
            why = "timed out" if timed_out else f"exit status {live.stream.exit_code}"
            raise SandboxError(
                f"task {task.id!r} setup command {command!r} failed ({why}):\n{output[-2000:]}"
            )

    def _command(self, live: _Live, command: str, timeout: float) -> bool:
        """Type a command line and wait for the prompt; True if it timed out (then interrupted)."""
        stream, tmux = live.stream, live.tmux
        assert tmux is not None
        mark = stream.begin_step()
        typed = [f"send-keys -t main -l -- {quote(command)}"] if command else []
        live.start_row = int(tmux.run(*_STEP_START, *typed, "send-keys -t main Enter")[1][0])
        if stream.wait_prompt(mark, timeout):
            return False
        if stream.ended is not None:
            raise TmuxError(stream.ended)
        for _ in range(3):
            mark = stream.prompt
            tmux.run("send-keys -t main C-c")
            if stream.wait_prompt(mark, INTERRUPT_WAIT):
                break
        return True

    def _keystrokes(self, live: _Live, items: list[dict[str, Any]]) -> None:
        stream, tmux = live.stream, live.tmux
        assert tmux is not None
        stream.begin_step()
        live.start_row = int(tmux.run(*_STEP_START)[1][0])
        for item in items:
            keys: str = item["keystrokes"]
            if is_key_name(keys):
                commands = [f"send-keys -t main {quote(keys)}"]
            else:
                commands = []
                for i, part in enumerate(keys.split("\n")):
                    if i:
                        commands.append("send-keys -t main Enter")
                    if part:
                        commands.append(f"send-keys -t main -l -- {quote(part)}")
            mark = stream.prompt
            if commands:
                tmux.run(*commands)
            # Return early once the shell is back at a prompt; otherwise wait the full duration.
            stream.wait_prompt(mark, item["duration"])
            if stream.ended is not None:
                raise TmuxError(stream.ended)

    def _observe(self, live: _Live, *, timed_out: bool, timeout: float, first: bool = False) -> Observation:
        assert live.tmux is not None
        history, screen = live.tmux.run(
            "display-message -p -t main '#{history_size}'", "capture-pane -p -t main"
        )
        while screen and not screen[-1].strip():
            screen.pop()
        scrolled = int(history[0]) if history else 0
        hidden = 0 if first else scrolled - live.start_row
        stream = live.stream
        text = "\n".join(screen)
        attachments: list[Attachment] = []
        if hidden > 0:
            text, output = scrolled_off(
                text, hidden, stream.step.content(), at_least=scrolled >= self.config.history_limit
            )
            attachments.append(output)
        if timed_out:
            text += f"\n[command timed out after {timeout:g} s and was interrupted]"
        # An exit status belongs to this step only if a prompt came back during it (a key sent to
        # vim must not carry the status of the command that started vim).
        finished = not first and stream.prompt > stream.step_prompt
        data = {
            "exit_code": stream.exit_code if finished else None,
            "cwd": stream.cwd,
            "timed_out": timed_out,
            "output_bytes": 0 if first else stream.step.total,
            "output_truncated": hidden > 0,
        }
        return Observation(
            format="terminal_screen",
            text=text[: self.config.max_observation_chars],
            data=data,
            attachments=attachments,
        )

"""SweSandbox: a private copy of a task's repository, with the tools `read`, `edit` and `bash`.

Reset copies the task's prepared template repository (never modified itself) into a fresh
workspace and makes a fresh environment for bash (see backends.py). `read` and `edit` act on the
workspace from the host side, refusing paths that lead outside it; `bash` runs inside the
isolation. A step whose workspace vanished or whose backend died raises SandboxCrashedError.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shlex
import shutil
import threading
import weakref
from pathlib import Path
from typing import Any

from sandboxes.base import Sandbox, SandboxClosedError, SandboxCrashedError, SandboxError, StepResult
from sandboxes.containment import sandbox_tmpdir
from sandboxes.swe.actions import BASH, EDIT, READ, TOOLS, parse_action
from sandboxes.swe.backends import Runner, make_runner
from sandboxes.swe.config import REPO_IN_SANDBOX, SweConfig
from sandboxes.swe.files import ToolError, ToolOutput, Workspace, bound
from sandboxes.swe.process import render
from sandboxes.swe.verify import SWE_TESTS, run_swe_tests
from schemas.records import Action, Environment, Observation, Step, Task, Verification

FORMAT = "swe_tool_result"
# How long close() waits for the workspaces of earlier episodes to be removed.
CLEANUP_WAIT_S = 120.0
# The environment config key naming where prepared repositories are cached; a replay needs it.
CACHE_DIR = "cache_dir"


def _template_dir(metadata: dict[str, Any], cache_dir: Path) -> Path:
    """The directory a task's workspace is copied from: its own `template`, or the prepared,
    mutated repository of `sandboxes.swe.repos`."""
    if metadata.get("template"):
        template = Path(metadata["template"])
    else:
        if not metadata.get("repo"):
            raise SandboxError(
                "a SWE task needs metadata 'template' (a directory) or 'repo' (a known repository)"
            )
        from sandboxes.swe.repos import task_template  # written alongside; imported only when needed

        template = Path(task_template(metadata, cache_dir))
    if not template.exists():
        raise SandboxError(f"SWE task template {template} does not exist")
    if not template.is_dir():
        raise SandboxError(f"SWE task template {template} is not a directory")
    return template


# Sandboxes not closed yet: a program that exits without closing one still removes its workspace
# and cgroups (a killed one leaves them; they live under the temporary directory).
_OPEN: weakref.WeakSet[SweSandbox] = weakref.WeakSet()


@atexit.register
def _close_open_sandboxes() -> None:
    for sandbox in list(_OPEN):
        sandbox.close()


def _chown_tree(root: str, uid_gid: tuple[int, int]) -> None:
    os.lchown(root, *uid_gid)
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(parent, name), *uid_gid)


class SweSandbox(Sandbox):
    domain = "swe"

    def __init__(self, config: SweConfig | None = None) -> None:
        self.config = config or SweConfig()
        self._started = False
        self._closed = False
        self._runner: Runner | None = None
        self._files: Workspace | None = None
        self._task: Task | None = None
        self._template: Path | None = None
        self._cleanups: list[threading.Thread] = []
        _OPEN.add(self)

    def start(self) -> None:
        if self._closed:
            raise SandboxClosedError("this SWE sandbox was closed; make a new one")
        self._started = True

    def reset(self, task: Task) -> Observation:
        if self._closed or not self._started:
            raise SandboxClosedError("start() the SWE sandbox before reset()")
        # The previous episode's workspace is removed while this one runs: deleting a repository
        # costs as much as copying one on some disks. close() waits for it.
        self._teardown(background=True)
        self._task = None
        template = _template_dir(task.metadata, Path(self.config.cache_dir))
        tmpdir = sandbox_tmpdir("swe")
        os.chmod(tmpdir, 0o755)  # the sandbox's user must reach the workspace inside it
        workspace = os.path.join(tmpdir, "repo")
        try:
            shutil.copytree(template, workspace, symlinks=True)
            runner = make_runner(self.config.backend, tmpdir, workspace)
        except BaseException:
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise
        self._runner = runner
        try:
            if runner.owner is not None:
                _chown_tree(workspace, runner.owner)
            runner.prepare()
        except BaseException:
            self._teardown()
            raise
        self._files = Workspace(workspace, (runner.where,), runner.owner, self.config.max_file_bytes)
        self._task, self._template = task, template
        return Observation(format=FORMAT, text=self._initial_text(task), data={"tool": "", "error": ""})

    def _initial_text(self, task: Task) -> str:
        assert self._files is not None and self._runner is not None
        meta = task.metadata
        name = meta.get("repo") or Path(str(meta.get("template", ""))).name or task.id
        title = " ".join(str(part) for part in (name, meta.get("version")) if part)
        text = f"Repository {title} at {self._runner.where}."
        if meta.get("test_command"):
            command = meta["test_command"]
            text += f" Run the tests with: {command if isinstance(command, str) else shlex.join(command)}"
        listing, _ = bound(self._files.listing(self._files.root), self.config.max_output_bytes)
        return f"{text}\n\n{listing}"

    def _live(self) -> tuple[Runner, Workspace]:
        if self._closed or not self._started:
            raise SandboxClosedError("the SWE sandbox is closed")
        if self._runner is None or self._files is None:
            raise SandboxError("reset() the SWE sandbox to a task before stepping")
        return self._runner, self._files

    def _check_workspace(self, files: Workspace, cause: BaseException | None = None) -> None:
        if not os.path.isdir(files.root):
            raise SandboxCrashedError(f"the workspace {files.root} vanished") from cause

    def step(self, action: Action) -> StepResult:
        runner, files = self._live()
        parsed = parse_action(action.kind, action.arguments)
        args = parsed.arguments
        data: dict[str, Any] = {"tool": parsed.kind, "exit_status": None, "timed_out": False}
        limit = self.config.max_output_bytes
        if parsed.kind == BASH:
            self._check_workspace(files)
            timeout = min(args.get("timeout_s", self.config.command_timeout_s), self.config.max_timeout_s)
            finished = runner.run(args["command"], timeout, limit)
            text = render(finished, timeout)
            data.update(exit_status=finished.exit_status, timed_out=finished.timed_out)
            data.update(truncated=bool(finished.dropped), error="")
            return StepResult(Observation(format=FORMAT, text=text, data=data))
        try:
            if parsed.kind == READ:
                out = files.read(args["path"], args.get("start_line"), args.get("end_line"), limit)
            else:
                out = files.edit(args)
        except ToolError as exc:
            # A failed read or edit may be the first sign of a vanished workspace.
            self._check_workspace(files, exc)
            out = ToolOutput(str(exc), error=str(exc))
        except OSError as exc:
            self._check_workspace(files, exc)
            message = f"Error: {exc.strerror or exc}"
            out = ToolOutput(message, error=message)
        data.update(truncated=out.truncated, error=out.error)
        if parsed.kind == EDIT:
            data["diff"] = out.diff
        return StepResult(Observation(format=FORMAT, text=out.text, data=data))

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        """The `swe_tests` verifier (sandboxes/swe/verify.py) on this episode's workspace."""
        if task.verifier.get("kind") != SWE_TESTS:
            return super().verify(task, steps)
        runner, files = self._live()
        self._check_workspace(files)
        assert self._template is not None  # set by every reset that made a workspace
        return run_swe_tests(runner, files.root, self._template, task.verifier)

    def close(self) -> None:
        self._teardown()
        for cleanup in self._cleanups:
            cleanup.join(CLEANUP_WAIT_S)
        self._cleanups.clear()
        self._closed = True
        _OPEN.discard(self)

    def _teardown(self, background: bool = False) -> None:
        runner, self._runner, self._files = self._runner, None, None
        if runner is None:
            return
        if not background:
            runner.destroy()
            return
        cleanup = threading.Thread(target=runner.destroy, name="swe-workspace-cleanup", daemon=True)
        cleanup.start()
        self._cleanups = [c for c in self._cleanups if c.is_alive()] + [cleanup]

    @property
    def alive(self) -> bool:
        if self._closed or not self._started:
            return False
        return self._runner is None or self._runner.crash_reason() is None

    def resources(self) -> list[str]:
        return self._runner.resources() if self._runner else []

    @property
    def workspace(self) -> str | None:
        """The workspace directory on the host (None before reset)."""
        return self._files.root if self._files else None

    def describe(self) -> Environment:
        backend = self.config.backend
        # Tuples (a bwrap backend's ro_paths) as lists: the record must survive a JSON round trip.
        config: dict[str, Any] = {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(backend).items()
            if k != "kind" and v is not None
        }
        config.update(
            command_timeout_s=self.config.command_timeout_s,
            max_output_bytes=self.config.max_output_bytes,
            repo_path=self._runner.where if self._runner else REPO_IN_SANDBOX,
            **{CACHE_DIR: str(self.config.cache_dir)},
        )
        if self._task is not None:
            config["task_metadata"] = self._task.metadata
        image = backend.image if backend.kind == "docker" else ""
        return Environment(name="swe", backend=backend.kind, image=image, config=config, tools=list(TOOLS))

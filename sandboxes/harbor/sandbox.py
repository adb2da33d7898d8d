"""HarborSandbox: the terminal sandbox in a Harbor task's image, bounded and verified as Harbor does.

A task carries what the sandbox needs in `task.metadata["harbor"]` (set by the task source):
`agent_timeout_sec`, the episode's wall-clock bound (each command's timeout is cut to the time
left; the step that reaches it ends the episode, `info["agent_timeout_s"]` saying so), and
`solution_dir`, copied to `/solution` at reset for the oracle (Harbor's OracleAgent does the same;
other policies never see it). Its verifier (kind "harbor") runs `tests/test.sh` in the same
container after the last step, once every process the agent started is gone (see verifier.py).
Image, CPU, memory and network come from the TerminalConfig's docker backend, one sandbox per task
environment.
"""

from __future__ import annotations

import subprocess
import time

from sandboxes.base import SandboxError, StepResult
from sandboxes.harbor.verifier import HARBOR, run_test_sh
from sandboxes.terminal import COMMAND, TerminalConfig, TerminalSandbox
from sandboxes.terminal.backends import DockerInstance
from sandboxes.terminal.config import DockerBackend
from schemas.records import Action, Observation, Step, Task, Verification


class HarborSandbox(TerminalSandbox):
    def __init__(self, config: TerminalConfig) -> None:
        if not isinstance(config.backend, DockerBackend):
            raise ValueError("a Harbor task runs in its own image: the docker backend is needed")
        super().__init__(config)
        self._deadline: float | None = None
        self._agent_timeout: float | None = None

    def reset(self, task: Task) -> Observation:
        observation = super().reset(task)
        harbor = task.metadata.get("harbor", {})
        if harbor.get("solution_dir"):
            self._upload(harbor["solution_dir"], "/solution")
        self._agent_timeout = harbor.get("agent_timeout_sec")
        self._deadline = time.monotonic() + self._agent_timeout if self._agent_timeout else None
        return observation

    def step(self, action: Action) -> StepResult:
        if self._deadline is not None and action.kind == COMMAND:
            left = max(self._deadline - time.monotonic(), 0.1)
            asked = action.arguments.get("timeout") or self.config.command_timeout
            if left < asked:
                action = Action(action.kind, {**action.arguments, "timeout": left}, action.text)
        result = super().step(action)
        if self._deadline is not None and time.monotonic() >= self._deadline:
            result.done = True
            result.info["agent_timeout_s"] = self._agent_timeout
        return result

    def verify(self, task: Task, steps: list[Step]) -> Verification | None:
        if task.verifier.get("kind") != HARBOR:
            return super().verify(task, steps)
        self._end_episode()  # the container restarted: nothing of the agent runs in it any more
        return run_test_sh(self._container(), task.verifier)

    def _container(self) -> str:
        instance = self._require_live().instance
        assert isinstance(instance, DockerInstance)
        return instance.container_id

    def _upload(self, source: str, target: str) -> None:
        container = self._container()
        for argv in (
            ["exec", "-u", "root", container, "mkdir", "-p", target],
            ["cp", f"{source}/.", f"{container}:{target}"],
            ["exec", "-u", "root", container, "chmod", "-R", "a+rX", target],
        ):
            done = subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise SandboxError(
                    f"cannot copy {source} to {target} in the container: {done.stderr.strip()}"
                )

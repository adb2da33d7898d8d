"""Gymnasium-style conformance checker that every sandbox's tests call.

`check_sandbox` drives a sandbox through start, reset, steps, a second reset and close, and
asserts the contract of `sandboxes.base` along the way. It is domain-agnostic: a sandbox that can
list what it holds (`resources()` returning "pid:<n>", "container:<id>" or "path:<p>" strings)
also gets checked for leaks after close.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

from sandboxes.base import Sandbox, SandboxClosedError, StepResult
from schemas.records import Action, Environment, Observation, Task


def process_exists(pid: int) -> bool:
    """True if `pid` is a live process (zombies awaiting their parent count as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state letter follows the command name, which is in parentheses and may contain spaces.
    return stat[stat.rindex(")") + 2 :][:1] != "Z"


def proc_files(*names: str) -> Iterator[tuple[int, list[bytes]]]:
    """(pid, the contents of each /proc/<pid>/<name>) of every process; one that ends or hides a file
    while it is read is left out."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            contents = []
            for name in names:
                with open(f"/proc/{entry}/{name}", "rb") as f:
                    contents.append(f.read())
        except OSError:
            continue
        yield int(entry), contents


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process."""
    parents: dict[int, int] = {}
    for child, (stat,) in proc_files("stat"):
        try:  # the parent follows the state letter, after the command name in parentheses
            parents[child] = int(stat.rsplit(b")", 1)[1].split()[1])
        except (IndexError, ValueError):
            continue
    return parents


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    return [child for child, parent in _parents().items() if parent == pid]


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (its children, theirs, and so on), read from /proc."""
    parents = _parents()
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        todo += children
    return found


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (from /proc)."""
    members = []
    for pid, (stat,) in proc_files("stat"):
        fields = stat[stat.rindex(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(pid)
    return members


def resource_exists(resource: str) -> bool:
    """Whether a resource string from `Sandbox.resources()` still exists on this host."""
    kind, _, ident = resource.partition(":")
    if kind == "pid":
        return process_exists(int(ident))
    if kind == "container":
        found = subprocess.run(["docker", "inspect", "--type", "container", ident], capture_output=True)
        return found.returncode == 0
    if kind == "path":
        return os.path.exists(ident)
    raise AssertionError(f"unknown resource kind in {resource!r}; expected pid:, container: or path:")


def _check_observation(obs: object, where: str) -> None:
    assert isinstance(obs, Observation), f"{where}: expected an Observation, got {type(obs).__name__}"
    assert isinstance(obs.format, str) and obs.format, f"{where}: observation.format must be a non-empty str"
    assert isinstance(obs.text, str), (
        f"{where}: observation.text must be a str, got {type(obs.text).__name__}"
    )
    assert isinstance(obs.data, dict), f"{where}: observation.data must be a dict"
    try:
        json.dumps(obs.data)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"{where}: observation.data is not JSON-serialisable: {exc}") from exc
    for att in obs.attachments:
        assert att.name and att.media_type, f"{where}: attachment needs a name and a media_type: {att!r}"
        assert att.content is not None or att.uri, (
            f"{where}: attachment {att.name!r} has neither content nor uri"
        )


def _resources(sandbox: Sandbox) -> list[str]:
    getter = getattr(sandbox, "resources", None)
    if getter is None:
        return []
    found = getter()
    assert isinstance(found, list) and all(isinstance(r, str) for r in found), (
        f"resources() must return a list of str, got {found!r}"
    )
    return found


def check_sandbox(sandbox: Sandbox, task: Task, actions: list[Action]) -> None:
    """Run the sandbox contract; raise AssertionError naming the first broken rule."""
    assert isinstance(sandbox, Sandbox), f"{type(sandbox).__name__} does not implement sandboxes.base.Sandbox"
    assert sandbox.domain, "sandbox.domain must be set"
    assert actions, "check_sandbox needs at least one action to step"
    held: set[str] = set()
    try:
        sandbox.start()
        sandbox.start()  # idempotent
        assert sandbox.alive, "sandbox.alive is False after start()"
        env = sandbox.describe()
        assert isinstance(env, Environment) and env.name and env.backend, f"describe() returned {env!r}"
        json.dumps(env.config)
        for round_ in (1, 2):
            obs = sandbox.reset(task)
            _check_observation(obs, f"reset #{round_}")
            held.update(_resources(sandbox))
            for i, action in enumerate(actions):
                result = sandbox.step(action)
                assert isinstance(result, StepResult), f"step {i}: expected StepResult, got {result!r}"
                _check_observation(result.observation, f"reset #{round_} step {i} ({action.kind})")
                assert result.reward is None or isinstance(result.reward, int | float), (
                    f"step {i}: reward must be a number or None"
                )
                assert isinstance(result.done, bool), f"step {i}: done must be a bool"
                json.dumps(result.info)
            assert sandbox.alive, f"sandbox.alive is False after the steps of reset #{round_}"
            held.update(_resources(sandbox))
    finally:
        sandbox.close()
    sandbox.close()  # idempotent
    assert not sandbox.alive, "sandbox.alive is True after close()"
    leaked = sorted(r for r in held if resource_exists(r))
    assert not leaked, f"close() left resources behind: {leaked}"
    try:
        sandbox.step(actions[0])
    except SandboxClosedError:
        pass
    else:
        raise AssertionError("step() after close() must raise SandboxClosedError")

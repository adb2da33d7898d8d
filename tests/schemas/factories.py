"""Trajectories for the tests: one that exercises every field, small variants, and `trajectory`, the
one builder for a test's own trajectory (it fills what the test does not care about)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

from schemas.records import (
    Action,
    Attachment,
    Environment,
    Observation,
    Outcome,
    Policy,
    Provenance,
    Step,
    Task,
    Trajectory,
)

START = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
SCREENSHOT = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def rich_trajectory(trajectory_id: str = "traj-rich-1", domain: str = "terminal") -> Trajectory:
    """Every field set, unicode and escape sequences in text, attachments with content, None reward."""
    return Trajectory(
        trajectory_id=trajectory_id,
        domain=domain,
        environment=Environment(
            name=domain, backend="docker", image="aw-terminal:1", config={"cpus": 1, "network": False}
        ),
        task=Task(
            id="task-ünïcode-日本",
            instruction="List the files, then print 'héllo 🌍'",
            setup=["mkdir -p /w", "touch /w/a.txt"],
            max_steps=5,
            metadata={"source": "unit", "tags": ["a", "b"], "nested": {"z": 1, "a": [1.5, None]}},
        ),
        policy=Policy(name="scripted", config={"seed": 7}),
        initial_observation=Observation(
            format="terminal_screen",
            text="root@box:/w# ",
            data={"cursor": [0, 13]},
            attachments=[Attachment(name="start.png", media_type="image/png", content=SCREENSHOT)],
        ),
        steps=[
            Step(
                index=0,
                action=Action(kind="command", arguments={"command": "ls"}, text="ls"),
                observation=Observation(format="terminal_screen", text="a.txt\nroot@box:/w# "),
                started_at=START,
                latency_s=0.25,
                reward=None,
                info={"exit_status": 0},
            ),
            Step(
                index=1,
                action=Action(
                    kind="keystrokes",
                    arguments={"keystrokes": [{"keystrokes": "echo 'héllo 🌍'", "duration": 0.1}]},
                    text="echo 'héllo 🌍'\n",
                ),
                observation=Observation(
                    format="terminal_screen",
                    text="\x1b[1mhéllo 🌍\x1b[0m\nroot@box:/w# ",
                    attachments=[
                        Attachment(name="end.png", media_type="image/png", content=SCREENSHOT),
                        Attachment(name="log.txt", media_type="text/plain", content="日本語\n".encode()),
                    ],
                ),
                started_at=START + timedelta(seconds=1),
                latency_s=0.0,
                reward=1.0,
                done=True,
            ),
        ],
        outcome=Outcome(status="completed"),
        provenance=Provenance(
            collector="collectors.terminal",
            collector_version="0.1.0",
            host="box-1",
            started_at=START.astimezone(timezone(timedelta(hours=2))),
            finished_at=START + timedelta(seconds=2),
            simulated=False,
        ),
    )


def trajectory(
    steps: Sequence[tuple[Action, Observation]],
    *,
    trajectory_id: str = "t1",
    domain: str = "terminal",
    environment: Environment | None = None,
    task: Task | None = None,
    initial: Observation | None = None,
    policy: Policy | None = None,
    outcome: Outcome | None = None,
    collector: str = "tests",
    simulated: bool = False,
    at: datetime = START,
    latency_s: float = 0.1,
    seconds_apart: float = 0.0,
) -> Trajectory:
    """A valid trajectory of `steps`, (action, observation) pairs, step k starting `k * seconds_apart`
    after `at`; every field not given is the plainest valid one (a local environment of `domain`, a
    scripted policy, a completed outcome)."""
    return Trajectory(
        trajectory_id=trajectory_id,
        domain=domain,
        environment=environment or Environment(domain, "local"),
        task=task or Task(id=f"task-{trajectory_id}"),
        policy=policy or Policy("scripted"),
        initial_observation=initial or Observation("text", "$ "),
        steps=[
            Step(k, action, observation, at + timedelta(seconds=k * seconds_apart), latency_s)
            for k, (action, observation) in enumerate(steps)
        ],
        outcome=outcome or Outcome("completed"),
        provenance=Provenance(
            collector,
            "0",
            "host",
            at,
            at + timedelta(seconds=len(steps) * seconds_apart),
            simulated=simulated,
        ),
    )


def small_trajectory(trajectory_id: str, domain: str = "terminal", status: str = "completed") -> Trajectory:
    """A minimal valid trajectory with one step and no attachments."""
    step = (
        Action(kind="command", arguments={"command": "true"}, text="true"),
        Observation(format="text", text="$ "),
    )
    return trajectory(
        [step], trajectory_id=trajectory_id, domain=domain, outcome=Outcome(status=status), latency_s=0.01
    )

"""Schema version 3: task verifiers, rewards and the verifier's output survive storage and are checked."""

import pytest

from schemas.records import SCHEMA_VERSION, Verification
from schemas.storage import TrajectoryWriter, read_trajectories
from schemas.validation import ValidationError, validate
from tests.schemas.factories import small_trajectory


def rewarded(reward: float | None) -> object:
    t = small_trajectory("r")
    t.task.verifier = {"kind": "command", "checks": ["test -f a", "test -f b"]}
    t.outcome.reward = reward
    t.outcome.verification = Verification(
        verifier="command", reward=reward, output="$ test -f a\n[exit 0]", details={"passed": 1}
    )
    return t


def test_verifier_reward_and_output_round_trip(tmp_path):
    with TrajectoryWriter(str(tmp_path)) as writer:
        writer.write(rewarded(0.5))
    (back,) = read_trajectories(str(tmp_path), validate=True)
    assert back.schema_version == SCHEMA_VERSION
    assert back.task.verifier["checks"] == ["test -f a", "test -f b"]
    assert back.outcome.reward == 0.5
    assert back.outcome.verification == rewarded(0.5).outcome.verification


def test_rewards_outside_0_1_or_disagreeing_are_invalid():
    with pytest.raises(ValidationError, match=r"outcome.reward: must be in \[0, 1\], got 1.5"):
        validate(rewarded(1.5))
    t = rewarded(1.0)
    t.outcome.reward = 0.0
    with pytest.raises(ValidationError, match="outcome.reward: differs from outcome.verification.reward"):
        validate(t)
    validate(rewarded(None))  # a verifier that could not run: the reward is unknown, not invalid

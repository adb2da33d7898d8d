"""`--shard i/n`: the partition of the slot plan, the option's parsing, and the CLI's refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.tasks import Shard
from tests.collectors.conftest import run_main


@pytest.mark.parametrize("count", [1, 2, 3, 7, 16])
@pytest.mark.parametrize("episodes", [0, 1, 5, 16, 101])
def test_shards_are_disjoint_and_cover_every_slot(count: int, episodes: int) -> None:
    parts = [Shard(index, count).slots(episodes) for index in range(count)]
    together = [slot for part in parts for slot in part]
    assert sorted(together) == list(range(episodes))  # complete, and no slot twice
    assert all(Shard(i, count).owns(slot) for i, part in enumerate(parts) for slot in part)
    # Even: no shard gets more than one slot above another.
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1


def test_a_shard_owns_the_same_slots_however_many_episodes_are_planned() -> None:
    # Stable: a restarted pod, or one whose --episodes grew, keeps its earlier slots.
    shard = Shard(2, 5)
    assert shard.slots(12) == [2, 7]
    assert shard.slots(40)[:2] == [2, 7]
    assert Shard.parse("2/5") == shard and str(shard) == "2/5"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("3/2", "below N"),
        ("2/2", "below N"),
        ("x", "I/N"),
        ("1/", "I/N"),
        ("-1/2", "I/N"),
        ("0/0", "at least 1"),
    ],
)
def test_bad_shard_values_say_what_is_expected(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        Shard.parse(text)


@pytest.mark.parametrize("module", ["terminal", "swe", "search", "mcp", "web", "desktop", "android"])
def test_every_collector_offers_shard(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(module, "--help") == 0
    assert "--shard I/N" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["3/2", "x"])
def test_a_bad_shard_exits_2_before_anything_is_written(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert run_main("terminal", "--backend", "local", "--shard", value, "--out", str(out)) == 2
    assert "--shard" in capsys.readouterr().err
    assert not out.exists()

"""A recording whose later shards are not Parquet, for the readers that must stop before them: the
replay policy's limit (tests/collectors) and the fidelity command's (tests/training)."""

from __future__ import annotations

from pathlib import Path

from schemas import TrajectoryWriter, read_trajectories
from schemas.storage import dataset_files

FIXTURE = Path(__file__).resolve().parents[1] / "beam_pipelines" / "fixtures" / "terminal_run"


def dataset_with_corrupt_tail(out: Path, source: Path = FIXTURE) -> tuple[Path, list[str]]:
    """`source`'s trajectories one per shard under `out`, every shard after the first overwritten with
    bytes that are not Parquet: a reader that gets past the first trajectory fails. Returns the ids in
    reading order."""
    found = list(read_trajectories(str(source)))
    assert len(found) >= 3, "the fixture recording needs several trajectories"
    with TrajectoryWriter(str(out), max_rows_per_shard=1) as writer:
        for t in found:
            writer.write(t)
    files = dataset_files(str(out))
    assert len(files) == len(found)
    first = next(read_trajectories(files[0]))
    for later in files[1:]:
        Path(later).write_bytes(b"not a parquet file")
    return out, [first.trajectory_id]

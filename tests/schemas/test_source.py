"""Schema version 4: an imported trajectory names the public dataset row it came from."""

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.records import Source
from schemas.storage import TrajectoryWriter, read_trajectories
from tests.schemas.factories import small_trajectory


def test_source_round_trips_and_captured_trajectories_have_none(tmp_path):
    imported = small_trajectory("imported")
    imported.provenance.source = Source(
        dataset="nebius/SWE-agent-trajectories",
        format="swe_agent",
        row_id="django__django-11099#3",
        version="2024-12",
        license="CC-BY-4.0",
        uri="/data/swe/train-00000.parquet",
    )
    with TrajectoryWriter(str(tmp_path)) as writer:
        writer.write(imported)
        writer.write(small_trajectory("captured"))
    back = {t.trajectory_id: t for t in read_trajectories(str(tmp_path), validate=True)}
    assert back["imported"].provenance.source == imported.provenance.source
    assert back["captured"].provenance.source is None


def test_files_without_the_source_column_still_read(tmp_path):
    with TrajectoryWriter(str(tmp_path)) as writer:
        writer.write(small_trajectory("old"))
    (shard,) = tmp_path.glob("domain=*/*.parquet")
    table = pq.read_table(shard)
    provenance = table.column("provenance").combine_chunks()
    fields = [f for f in provenance.type if f.name != "source"]
    old = provenance.flatten()[: len(fields)]
    stripped = pa.StructArray.from_arrays(old, fields=fields)
    table = table.set_column(table.schema.get_field_index("provenance"), "provenance", stripped)
    pq.write_table(table, shard)
    (back,) = read_trajectories(str(tmp_path), validate=True)
    assert back.provenance.source is None

"""SpillByKey groups records through files: every record comes back under its key, the shuffle
carries a location per key and flush whatever the record count, and a failed bundle leaves no file."""

from __future__ import annotations

import os

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.stages.park import RangeReader
from beam_pipelines.stages.spill import SpillByKey, _Spill, read_spilled
from tests.beam_pipelines.conftest import pipeline


def _records(n: int) -> list[tuple[str, bytes]]:
    # lengths from 0 to 299 bytes, so frames of every size (the empty record included) are read back
    return [(f"key-{i % 3}", bytes([i % 251]) * (i % 300)) for i in range(n)]


@pytest.mark.parametrize("flush_bytes", [1, 10_000, 1 << 30])  # a flush per record, several, one
def test_every_record_comes_back_under_its_key(tmp_path, flush_bytes):
    expected: dict[str, list[bytes]] = {}
    for key, record in _records(2000):
        expected.setdefault(key, []).append(record)
    root = str(tmp_path / "spill")

    def read_back(group):
        key, locations = group
        return key, sorted(read_spilled(RangeReader(), root, locations))

    with pipeline() as p:
        grouped = p | beam.Create(_records(2000)) | SpillByKey(root, flush_bytes=flush_bytes)
        assert_that(grouped | beam.Map(read_back), equal_to([(k, sorted(v)) for k, v in expected.items()]))


def _locations(root: str, n: int, flush_bytes: int) -> list[tuple[str, bytes]]:
    """What one bundle of `n` records sends to the shuffle."""
    spill = _Spill(root, flush_bytes)
    spill.start_bundle()
    located = [x for element in _records(n) for x in spill.process(element)]
    located += [windowed.value for windowed in spill.finish_bundle()]
    return located


def test_locations_do_not_grow_with_the_records(tmp_path):
    few = _locations(str(tmp_path / "few"), 400, 1 << 20)
    many = _locations(str(tmp_path / "many"), 4000, 1 << 20)
    assert len(few) == len(many) == 3  # one per key
    flushed = _locations(str(tmp_path / "flushed"), 4000, 100_000)  # about 600 KB of records
    assert 3 * 5 <= len(flushed) <= 3 * 7, len(flushed)


def test_a_failed_bundle_leaves_no_file(tmp_path):
    spill = _Spill(str(tmp_path), flush_bytes=100)
    spill.start_bundle()
    located = [x for element in _records(50) for x in spill.process(element)]
    assert located  # flushed to the bundle's temporary file mid-bundle
    spill.teardown()  # the runner gives up on the bundle
    assert [name for _, _, names in os.walk(tmp_path) for name in names] == []

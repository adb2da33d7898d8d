"""Group many small records by a few keys through files: only where each key's records lie crosses the
shuffle, so what a runner holds for the grouping does not grow with the corpus.

    (key, record bytes) -> SpillByKey(root) -> (key, Iterable[location]) -> read_spilled(...) -> records

Why: FnApiRunner keeps everything it groups in its own memory, as one decoded Python object per
element plus an encoded copy while a stage reads it, and hands a group's values to a worker whole;
other runners pickle, send and store every element. With one element per trajectory for the shard
references and the band entries packed 1 MiB to a value, the runner still grew by 50-66 MiB (about
3 KB per trajectory) from 20,000 to 40,000 trajectories (benchmarks/results/corpus.md).

Here each worker buffers its records per key (`flush_bytes` in all) and appends each key's buffer,
framed, to a file of its bundle (`BundleFile`: renamed into place when the bundle finishes, removed
with a failed one); the shuffle carries one 28-byte location per key and flush. Records of one key
keep their order within a location; locations come in no particular order, as GroupByKey's values do.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Hashable, Iterable, Iterator

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_pipelines.stages.park import BundleFile, RangeReader, bundle_file_path

FLUSH_BYTES = 4 << 20  # records a worker buffers before it writes them out
_LOCATION = struct.Struct("<16sQI")  # bundle file name, offset, length
_FRAME = struct.Struct("<I")  # a record's length, before it


class _Spill(beam.DoFn):
    def __init__(self, root: str, flush_bytes: int) -> None:
        self._root, self._flush_bytes = root, flush_bytes
        self._file: BundleFile | None = None

    def start_bundle(self) -> None:
        self.teardown()  # what a failed bundle left
        self._file = BundleFile(self._root)
        self._buffers: dict[Hashable, bytearray] = defaultdict(bytearray)
        self._size = 0

    def process(self, element: tuple[Hashable, bytes]) -> Iterator[tuple[Hashable, bytes]]:
        key, record = element
        self._buffers[key] += _FRAME.pack(len(record)) + record
        self._size += _FRAME.size + len(record)
        if self._size >= self._flush_bytes:
            yield from self._flush()

    def finish_bundle(self) -> Iterator[object]:
        located = list(self._flush())
        self._file.commit()  # before the locations that point into it leave the bundle
        for element in located:
            yield GlobalWindows.windowed_value(element)

    def teardown(self) -> None:
        if self._file is not None:
            self._file.abandon()

    def _flush(self) -> Iterator[tuple[Hashable, bytes]]:
        buffers, self._buffers, self._size = self._buffers, defaultdict(bytearray), 0
        for key, data in buffers.items():
            _, offset = self._file.append(bytes(data))
            yield key, _LOCATION.pack(self._file.name, offset, len(data))


class SpillByKey(beam.PTransform):
    """(key, bytes) -> (key, Iterable[location]): each key's records are in the files the locations
    name (under `root`); `read_spilled` gives them back."""

    def __init__(self, root: str, flush_bytes: int = FLUSH_BYTES) -> None:
        super().__init__()
        self._root, self._flush_bytes = root, flush_bytes

    def expand(self, records: beam.PCollection) -> beam.PCollection:
        return (
            records
            | "Spill" >> beam.ParDo(_Spill(self._root, self._flush_bytes))
            | "GroupLocations" >> beam.GroupByKey()
        )


def read_spilled(reader: RangeReader, root: str, locations: Iterable[bytes]) -> Iterator[bytes]:
    """The records at `locations`, one location's records at a time (memory: one location's bytes)."""
    for location in locations:
        name, offset, length = _LOCATION.unpack(location)
        data = memoryview(reader.read(bundle_file_path(root, name), offset, length))
        at = 0
        while at < length:
            (size,) = _FRAME.unpack_from(data, at)
            at += _FRAME.size
            yield bytes(data[at : at + size])
            at += size

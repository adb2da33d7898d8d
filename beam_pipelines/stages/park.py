"""Park each trajectory once in a file private to the run, so only a small `Parked` reference to it
crosses the shuffles that follow (deduplication, grouping by output shard).

Why: a shuffle holds what it carries. FnApiRunner keeps every grouped collection in memory, and on
any runner a shuffle is pickled, sent and stored. Trajectories are large and many; references are a
few hundred bytes. The worker that builds an output shard reads its trajectories back by reference, a
window at a time, so memory is bounded by the window and not by the corpus.

Each bundle appends to one file, OUT/.parked/<uuid>.bin (zlib-compressed pickles written one after
another), renamed into place when the bundle finishes; a failed bundle's file is removed and its
references are discarded with it by the runner (`BundleFile`, which dedup's sketches use too). The files
are written and read by the same job, like Beam's own pickled shuffle, and `remove_parked` deletes them
when the job ends.
"""

from __future__ import annotations

import hashlib
import pickle
import posixpath
import uuid
import zlib
from collections.abc import Iterator, Sequence
from typing import IO, Any

import apache_beam as beam
from fsspec.core import url_to_fs

from beam_pipelines.stages.common import Parked
from beam_pipelines.stages.write import HeldFile
from schemas.records import Trajectory

PARKED_DIR = ".parked"
_OPEN_FILES = 64  # parked files a reader keeps open at once


def parked_root(output: str) -> str:
    return posixpath.join(output, PARKED_DIR)


def remove_parked(output: str) -> None:
    """Delete the run's parked files (after the run, and before one, in case a killed run left some)."""
    fs, root = url_to_fs(parked_root(output))
    if fs.exists(root):
        fs.rm(root, recursive=True)


def bundle_file_path(root: str, name: bytes) -> str:
    return posixpath.join(root, f"{name.hex()}.bin")


class BundleFile:
    """Records appended to one file per bundle under `root`, renamed into place when the bundle
    finishes (`commit`); a failed bundle's file is removed (`abandon`) with the outputs the runner
    discards. Parked trajectories and dedup's sketches are both written this way."""

    def __init__(self, root: str) -> None:
        self._root = root
        self._held: HeldFile | None = None
        self._offset = 0
        self.name = b""  # the current file's name, as `bundle_file_path` takes it

    def append(self, data: bytes) -> tuple[str, int]:
        """Write `data`; returns the file's path and where `data` starts in it."""
        if self._held is None:
            self.name = uuid.uuid4().bytes
            self._held, self._offset = HeldFile(bundle_file_path(self._root, self.name)), 0
        self._held.file.write(data)
        start, self._offset = self._offset, self._offset + len(data)
        return self._held.target, start

    def commit(self) -> None:
        if self._held is not None:
            self._held.commit()
            self._held = None

    def abandon(self) -> None:
        if self._held is not None:
            self._held.abort(RuntimeError("bundle failed"))
            self._held = None


class _Park(beam.DoFn):
    def __init__(self, root: str) -> None:
        self._root = root
        self._file: BundleFile | None = None

    def start_bundle(self) -> None:
        self.teardown()  # what a failed bundle left
        self._file = BundleFile(self._root)

    def process(self, pair: tuple[str, Trajectory]) -> Iterator[tuple[Parked, Trajectory]]:
        split, t = pair
        data = zlib.compress(pickle.dumps(t, protocol=pickle.HIGHEST_PROTOCOL), 1)
        path, offset = self._file.append(data)
        digest = hashlib.blake2b(data, digest_size=16).digest()
        yield Parked(t.trajectory_id, t.domain, split, path, offset, len(data), digest), t

    def finish_bundle(self) -> None:
        self._file.commit()

    def teardown(self) -> None:
        if self._file is not None:
            self._file.abandon()


class ParkTrajectories(beam.PTransform):
    """(split, Trajectory) -> (Parked, Trajectory): the trajectory is parked under `parked_root(output)`
    and passed on, in the same fused step, to whatever needs its content before the next shuffle."""

    def __init__(self, output: str) -> None:
        super().__init__()
        self._root = parked_root(output)

    def expand(self, pairs: beam.PCollection) -> beam.PCollection:
        return pairs | "Park" >> beam.ParDo(_Park(self._root))


class RangeReader:
    """Reads byte ranges of the run's files, keeping the files it opened open until `close`."""

    def __init__(self) -> None:
        self._files: dict[str, IO[Any]] = {}

    def read(self, path: str, offset: int, length: int) -> bytes:
        source = self._open(path)
        source.seek(offset)
        data = source.read(length)
        if len(data) != length:
            raise OSError(f"{path} is shorter than the pipeline wrote it; rerun the pipeline")
        return data

    def trajectories(self, refs: Sequence[Parked]) -> list[Trajectory]:
        """The parked trajectories of `refs`, in the order of `refs` (read in file order)."""
        found: dict[int, Trajectory] = {}
        for i in sorted(range(len(refs)), key=lambda i: (refs[i].path, refs[i].offset)):
            ref = refs[i]
            found[i] = pickle.loads(zlib.decompress(self.read(ref.path, ref.offset, ref.length)))
        return [found[i] for i in range(len(refs))]

    def _open(self, path: str) -> IO[Any]:
        if path not in self._files:
            if len(self._files) >= _OPEN_FILES:
                self.close()
            fs, local = url_to_fs(path)
            self._files[path] = fs.open(local, "rb")
        return self._files[path]

    def close(self) -> None:
        for source in self._files.values():
            source.close()
        self._files.clear()

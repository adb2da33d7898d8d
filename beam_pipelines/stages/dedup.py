"""Stage 8: find exact and near duplicates within each domain, keeping one representative per
cluster deterministically (the smallest trajectory_id).

The input is (Parked, Trajectory) from `ParkTrajectories`, in the same fused step. Each trajectory is
sketched there (its exact-text hash and MinHash signature) and the sketch is written, like the
trajectory itself, to a file private to the run; the trajectory is dropped. What LSH needs to find
candidates, one 30-byte entry per band (an 8-byte hash of the band's values and where the sketch
lies), is grouped through files too (`SpillByKey`), so the shuffle carries only where each bucket
group's entries lie, not one element per trajectory:

    Sketch -> SpillByKey((domain, band, bucket group), entry)
           -> Verify: per bucket, read the members' sketches, compare each with the smallest id
           -> CombinePerKey(min) of the decisions per dropped id

The sketches are read back only for the members of buckets with more than one member, which are few
unless the data is mostly duplicates.

Exact duplicates have equal signatures, so they meet in every bucket; the verifier tells them from
near duplicates by their exact-text hash. The output is the decisions, one per dropped id, for
`BuildShards` to skip those trajectories when it reads them back; its references were never held here.

A bucket member whose estimated Jaccard similarity with the bucket's representative reaches
`threshold` is dropped. As with any LSH dedup, a chain A~B~C can drop C against B even though B
itself is dropped against A; the result is still deterministic.
"""

from __future__ import annotations

import hashlib
import posixpath
import struct
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import apache_beam as beam

from beam_pipelines.dead_letter import DEAD_LETTER, OK, DeadLetter, count
from beam_pipelines.memory import release_free_memory
from beam_pipelines.stages.common import Parked
from beam_pipelines.stages.park import BundleFile, RangeReader, bundle_file_path, parked_root
from beam_pipelines.stages.spill import SpillByKey, read_spilled
from beam_pipelines.text import MinHasher, bands, dedup_key_text, estimated_jaccard, exact_key, shingle_hashes
from schemas import Trajectory

STAGE = "dedup"
DROPS = "drops"
_ENTRIES = "entries"
# A decision is (reason, kept id, similarity); reasons sort exact before near.
Decision = tuple[str, str, float]
# Masked lines remembered per worker: lines repeat across screens and across a task's trajectories.
_MASK_MEMO_LINES = 20_000
# Sketch runs fused with Read, Redact and Park: the heap pages they freed are handed back this often.
_TRIM_EVERY = 256
BandGroup = tuple[str, int, int]  # domain, band number, bucket group (a hash of the band's values)
# Bucket groups per band: a group's entries are matched in one worker call, so this bounds that
# call's memory to 1/(bands * groups) of a domain's entries.
BAND_GROUPS = 64
# band hash, sketch file name, offset, length
_ENTRY = struct.Struct("<8s16sIH")
_EXACT_BYTES = 16


class Sketch(NamedTuple):
    trajectory_id: str
    exact: bytes
    signature: bytes

    def to_bytes(self) -> bytes:
        return self.exact + self.signature + self.trajectory_id.encode()

    @classmethod
    def from_bytes(cls, data: bytes, signature_bytes: int) -> Sketch:
        end = _EXACT_BYTES + signature_bytes
        return cls(data[end:].decode(), data[:_EXACT_BYTES], data[_EXACT_BYTES:end])


def sketch_root(output: str) -> str:
    return posixpath.join(parked_root(output), "sketches")


def band_root(output: str) -> str:
    return posixpath.join(parked_root(output), "bands")


class _MakeSketch(beam.DoFn):
    """(Parked, Trajectory) -> the Parked reference; (BandGroup, entry) per band as a tagged output."""

    def __init__(
        self,
        root: str,
        num_perm: int,
        band_count: int,
        seed: int,
        shingle_words: int,
        groups: int = BAND_GROUPS,
    ) -> None:
        self._root, self._num_perm, self._band_count = root, num_perm, band_count
        self._seed, self._shingle_words, self._groups = seed, shingle_words, groups
        self._file: BundleFile | None = None

    def setup(self) -> None:
        self._hasher = MinHasher(self._num_perm, self._seed)
        self._masked: dict[str, str] = {}
        self._sketched = 0

    def start_bundle(self) -> None:
        self.teardown()  # what a failed bundle left
        self._file = BundleFile(self._root)

    def process(self, pair: tuple[Parked, Trajectory]) -> Iterator[object]:
        ref, t = pair
        if len(self._masked) > _MASK_MEMO_LINES:
            self._masked.clear()
        self._sketched += 1
        if self._sketched % _TRIM_EVERY == 0:
            release_free_memory()
        text = dedup_key_text(t, self._masked)
        signature = self._hasher.signature(shingle_hashes(text, self._shingle_words))
        record = Sketch(t.trajectory_id, exact_key(text), signature).to_bytes()
        _, offset = self._file.append(record)
        for i, band in enumerate(bands(signature, self._band_count)):
            band_hash = hashlib.blake2b(band, digest_size=8).digest()
            entry = _ENTRY.pack(band_hash, self._file.name, offset, len(record))
            yield beam.pvalue.TaggedOutput(_ENTRIES, ((t.domain, i, zlib.crc32(band) % self._groups), entry))
        yield ref

    def finish_bundle(self) -> None:
        self._file.commit()  # the entries that point into it are read after the bundle

    def teardown(self) -> None:
        if self._file is not None:
            self._file.abandon()


class _Verify(beam.DoFn):
    """A bucket group's spilled entries -> (dropped id, Decision) for every bucket member that is an
    exact or near duplicate of the bucket's smallest id."""

    def __init__(self, sketches: str, bands: str, threshold: float, num_perm: int) -> None:
        self._sketches, self._bands = sketches, bands
        self._threshold, self._signature_bytes = threshold, num_perm * 4

    def process(self, group: tuple[BandGroup, Iterable[bytes]]) -> Iterator[tuple[str, Decision]]:
        _, locations = group
        buckets: dict[bytes, set[tuple[bytes, int, int]]] = defaultdict(set)
        reader, sketches = RangeReader(), {}
        try:
            for entry in read_spilled(reader, self._bands, locations):
                band_hash, *where = _ENTRY.unpack(entry)
                buckets[band_hash].add(tuple(where))
            for members in buckets.values():
                if len(members) > 1:
                    for where in members - sketches.keys():
                        name, offset, length = where
                        data = reader.read(bundle_file_path(self._sketches, name), offset, length)
                        sketches[where] = Sketch.from_bytes(data, self._signature_bytes)
                    yield from self._decide([sketches[where] for where in members])
        finally:
            reader.close()

    def _decide(self, members: list[Sketch]) -> Iterator[tuple[str, Decision]]:
        # One sketch per id, the same whichever copy came first (a trajectory read twice is not its
        # own duplicate; `BuildShards` keeps one of its records).
        by_id: dict[str, Sketch] = {}
        for sketch in sorted(members, key=Sketch.to_bytes):
            by_id.setdefault(sketch.trajectory_id, sketch)
        kept, *others = (by_id[i] for i in sorted(by_id))
        for other in others:
            if other.exact == kept.exact:
                yield other.trajectory_id, ("exact_duplicate", kept.trajectory_id, 1.0)
                continue
            similarity = estimated_jaccard(kept.signature, other.signature)
            if similarity >= self._threshold:
                yield other.trajectory_id, ("near_duplicate", kept.trajectory_id, similarity)


def _dead_letter(drop: tuple[str, Decision]) -> DeadLetter:
    trajectory_id, (reason, kept, similarity) = drop
    count(STAGE, reason)
    detail = f"duplicate of {kept} (estimated Jaccard {similarity:.3f})"
    return DeadLetter(STAGE, reason, detail, trajectory_id=trajectory_id)


class Deduplicate(beam.PTransform):
    """(Parked, Trajectory) -> {"ok": every `Parked` reference, "drops": (trajectory_id, Decision) per
    dropped id, "dead_letter": DeadLetter with reason "exact_duplicate" / "near_duplicate" (the
    detail names the kept id)}. `BuildShards` takes "drops" and skips those trajectories.

    output: the pipeline's output root (sketches are parked under it). threshold: estimated Jaccard
    similarity of shingle sets at or above which two trajectories are near duplicates. num_perm:
    MinHash permutations; bands: LSH bands (num_perm must divide into them; more bands find more
    candidate pairs below the threshold, at more shuffle volume).
    """

    def __init__(
        self,
        output: str,
        threshold: float = 0.8,
        num_perm: int = 64,
        bands: int = 16,
        shingle_words: int = 5,
        seed: int = 1,
    ) -> None:
        super().__init__()
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if bands < 1 or num_perm % bands:
            raise ValueError(f"num_perm ({num_perm}) must be a positive multiple of bands ({bands})")
        self._sketches, self._bands = sketch_root(output), band_root(output)
        self._threshold, self._num_perm, self._band_count = threshold, num_perm, bands
        self._shingle_words, self._seed = shingle_words, seed

    def expand(self, parked: beam.PCollection) -> dict[str, beam.PCollection]:
        sketched = parked | "Sketch" >> beam.ParDo(
            _MakeSketch(self._sketches, self._num_perm, self._band_count, self._seed, self._shingle_words)
        ).with_outputs(_ENTRIES, main=OK)
        drops = (
            sketched[_ENTRIES]
            | "GroupBands" >> SpillByKey(self._bands)
            | "Verify" >> beam.ParDo(_Verify(self._sketches, self._bands, self._threshold, self._num_perm))
            # Exact sorts before near, then the smallest kept id: one deterministic decision per id.
            | "OneDecisionPerId" >> beam.CombinePerKey(min)
        )
        dead = drops | "DropsToDeadLetters" >> beam.Map(_dead_letter)
        return {OK: sketched[OK], DROPS: drops, DEAD_LETTER: dead}

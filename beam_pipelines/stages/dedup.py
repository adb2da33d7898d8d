"""Stage 8: drop exact and near duplicates within each domain, keeping one representative per
cluster deterministically (the smallest trajectory_id).

The input is (Parked, Trajectory) from `ParkTrajectories`, in the same fused step: the trajectory is
sketched here and dropped, and nothing larger than an id, a hash, a MinHash signature or a `Parked`
reference crosses a shuffle:

    Sketch -> GroupByKey(domain, sha256 of dedup_key_text)           exact clusters
           -> GroupByKey(domain, band, bucket group)                  LSH buckets of ids, packed
           -> CoGroupByKey with the signatures, by candidate, then by representative: similarity
           -> CombinePerKey(min) of the decisions per id -> CoGroupByKey with the references

A bucket holds ids only: each signature is shuffled into `bands` buckets, so carrying it there would
multiply the largest value of the stage by `bands`; it is joined to the few candidate pairs instead.
And bucket entries travel packed, many to a bytes value: there are `bands` of them per trajectory,
and FnApiRunner holds a grouped element as Python objects (a key, a list, a value: a few hundred
bytes) where a packed entry costs its own bytes, about fifty. Each grouped value is a blob of
entries (band bytes, id) for one bucket group of one band; the worker that reads a group forms
its buckets, so a bucket is exactly the trajectories whose band bytes are equal, as before.

The output is the kept trajectories' references; `BuildShards` reads the trajectories back.

A bucket member whose estimated Jaccard similarity with the bucket's representative reaches
`threshold` is dropped. As with any LSH dedup, a chain A~B~C can drop C against B even though B
itself is dropped against A; the result is still deterministic.
"""

from __future__ import annotations

import struct
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from beam_pipelines.dead_letter import DEAD_LETTER, OK, DeadLetter, count
from beam_pipelines.memory import release_free_memory
from beam_pipelines.stages.common import Parked
from beam_pipelines.text import MinHasher, bands, dedup_key_text, estimated_jaccard, exact_key, shingle_hashes
from schemas import Trajectory

STAGE = "dedup"
_SKETCH = "sketch"
_DROP = "drop"
_REFS = "refs"
_CANDIDATES = "candidates"
_SIGNATURE = "signature"
# A sketch is (trajectory_id, signature bytes); a decision is (reason, kept id, similarity).
Sketch = tuple[str, bytes]
Decision = tuple[str, str, float]
# Masked lines remembered per worker: lines repeat across screens and across a task's trajectories.
_MASK_MEMO_LINES = 20_000
# Sketch runs fused with Read, Redact and Park: the heap pages they freed are handed back this often.
_TRIM_EVERY = 256
BandGroup = tuple[str, int, int]  # domain, band number, bucket group (a hash of the band's bytes)
# Bucket groups per band: a group's entries are matched in one worker call, so this bounds that
# call's memory to 1/(bands * groups) of a domain's entries.
BAND_GROUPS = 64
_PACKED_BYTES = 1 << 20  # entries a worker holds before it sends them on
_ENTRY_HEAD = struct.Struct("<II")  # band length, id length; then the band, then the id (UTF-8)


class _MakeSketch(beam.DoFn):
    def __init__(self, num_perm: int, seed: int, shingle_words: int) -> None:
        self._num_perm, self._seed, self._shingle_words = num_perm, seed, shingle_words

    def setup(self) -> None:
        self._hasher = MinHasher(self._num_perm, self._seed)
        self._masked: dict[str, str] = {}
        self._sketched = 0

    def process(self, pair: tuple[Parked, Trajectory]) -> Iterator[object]:
        ref, t = pair
        if len(self._masked) > _MASK_MEMO_LINES:
            self._masked.clear()
        self._sketched += 1
        if self._sketched % _TRIM_EVERY == 0:
            release_free_memory()
        text = dedup_key_text(t, self._masked)
        exact = exact_key(text)
        signature = self._hasher.signature(shingle_hashes(text, self._shingle_words))
        yield beam.pvalue.TaggedOutput(_SKETCH, ((t.domain, exact), (t.trajectory_id, signature)))
        yield t.trajectory_id, ref.packed()


def _unique_sorted(members: Iterable[Sketch]) -> list[Sketch]:
    """Members by id, one per id (a trajectory read twice is not its own duplicate)."""
    return sorted(dict(members).items())


class _PickExact(beam.DoFn):
    def process(self, cluster: tuple[tuple[str, str], Iterable[Sketch]]) -> Iterator[object]:
        (domain, _), members = cluster
        (kept, signature), *dropped = _unique_sorted(members)
        for trajectory_id, _ in dropped:
            yield beam.pvalue.TaggedOutput(_DROP, (trajectory_id, ("exact_duplicate", kept, 1.0)))
        yield domain, (kept, signature)


class _PackBandEntries(beam.DoFn):
    """(domain, (id, signature)) -> ((domain, band, bucket group), packed entries of many trajectories)."""

    def __init__(self, band_count: int, groups: int = BAND_GROUPS) -> None:
        self._band_count = band_count
        self._groups = groups

    def start_bundle(self) -> None:
        self._packed: dict[BandGroup, bytearray] = defaultdict(bytearray)
        self._size = 0

    def process(self, unique: tuple[str, Sketch]) -> Iterator[tuple[BandGroup, bytes]]:
        domain, (trajectory_id, signature) = unique
        name = trajectory_id.encode()
        for i, band in enumerate(bands(signature, self._band_count)):
            entry = _ENTRY_HEAD.pack(len(band), len(name)) + band + name
            self._packed[(domain, i, zlib.crc32(band) % self._groups)] += entry
            self._size += len(entry)
        if self._size >= _PACKED_BYTES:
            yield from self._flush()

    def finish_bundle(self) -> Iterator[object]:
        for element in self._flush():
            yield GlobalWindows.windowed_value(element)

    def _flush(self) -> Iterator[tuple[BandGroup, bytes]]:
        packed, self._packed, self._size = self._packed, defaultdict(bytearray), 0
        for group in sorted(packed):
            yield group, bytes(packed[group])


def _unpack(packed: bytes) -> Iterator[tuple[bytes, str]]:
    at = 0
    while at < len(packed):
        band_length, name_length = _ENTRY_HEAD.unpack_from(packed, at)
        at += _ENTRY_HEAD.size
        band, at = packed[at : at + band_length], at + band_length
        yield band, packed[at : at + name_length].decode()
        at += name_length


def _candidates(group: tuple[BandGroup, Iterable[bytes]]) -> Iterator[tuple[str, str]]:
    """(candidate, representative): in every bucket of the group (the ids with equal band bytes), each
    member against the bucket's smallest id."""
    _, packs = group
    buckets: dict[bytes, set[str]] = defaultdict(set)
    for packed in packs:
        for band, trajectory_id in _unpack(packed):
            buckets[band].add(trajectory_id)
    for members in buckets.values():
        if len(members) > 1:
            kept, *others = sorted(members)
            for other in others:
                yield other, kept


def _to_representative(joined: tuple[str, dict[str, list]]) -> Iterator[tuple[str, Sketch]]:
    candidate, groups = joined
    if groups[_CANDIDATES]:
        signature = groups[_SIGNATURE][0]
        for kept in sorted(set(groups[_CANDIDATES])):
            yield kept, (candidate, signature)


def _pick_near(joined: tuple[str, dict[str, list]], threshold: float) -> Iterator[tuple[str, Decision]]:
    kept, groups = joined
    if not groups[_CANDIDATES]:
        return
    kept_signature = groups[_SIGNATURE][0]
    for trajectory_id, signature in _unique_sorted(groups[_CANDIDATES]):
        similarity = estimated_jaccard(kept_signature, signature)
        if similarity >= threshold:
            yield trajectory_id, ("near_duplicate", kept, similarity)


class _Route(beam.DoFn):
    def process(self, joined: tuple[str, dict[str, list]]) -> Iterator[object]:
        trajectory_id, groups = joined
        # Several records under one id are one record read twice, or a corrupt dataset: keep one,
        # chosen by content hash so the choice does not depend on arrival order.
        copies = sorted(map(Parked.unpacked, groups[_REFS]), key=lambda ref: ref.digest)
        for _ in copies[1:]:
            count(STAGE, "duplicate_id")
            detail = "another record with the same trajectory_id was kept"
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTER, DeadLetter(STAGE, "duplicate_id", detail, trajectory_id=trajectory_id)
            )
        if not copies:
            return
        if groups[_DROP]:
            reason, kept, similarity = groups[_DROP][0]
            count(STAGE, reason)
            detail = f"duplicate of {kept} (estimated Jaccard {similarity:.3f})"
            yield beam.pvalue.TaggedOutput(
                DEAD_LETTER, DeadLetter(STAGE, reason, detail, trajectory_id=trajectory_id)
            )
            return
        count(STAGE, "kept")
        yield copies[0]


class Deduplicate(beam.PTransform):
    """(Parked, Trajectory) -> {"ok": the `Parked` reference of one trajectory per duplicate cluster,
    "dead_letter": DeadLetter with reason "exact_duplicate" / "near_duplicate" (detail names the kept
    id) or "duplicate_id"}.

    threshold: estimated Jaccard similarity of shingle sets at or above which two trajectories are
    near duplicates. num_perm: MinHash permutations; bands: LSH bands (num_perm must divide into
    them; more bands find more candidate pairs below the threshold, at more shuffle volume).
    """

    def __init__(
        self,
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
        self._threshold, self._num_perm, self._bands = threshold, num_perm, bands
        self._shingle_words, self._seed = shingle_words, seed

    def expand(self, parked: beam.PCollection) -> dict[str, beam.PCollection]:
        sketched = parked | "Sketch" >> beam.ParDo(
            _MakeSketch(self._num_perm, self._seed, self._shingle_words)
        ).with_outputs(_SKETCH, main=_REFS)
        exact = (
            sketched[_SKETCH]
            | "GroupExact" >> beam.GroupByKey()
            | "PickExact" >> beam.ParDo(_PickExact()).with_outputs(_DROP, main=OK)
        )
        signatures = exact[OK] | "Signatures" >> beam.MapTuple(lambda _, sketch: sketch)
        candidates = (
            exact[OK]
            | "PackBandEntries" >> beam.ParDo(_PackBandEntries(self._bands))
            | "GroupBands" >> beam.GroupByKey()
            | "Candidates" >> beam.FlatMap(_candidates)
        )
        by_representative = (
            {_SIGNATURE: signatures, _CANDIDATES: candidates}
            | "JoinCandidates" >> beam.CoGroupByKey()
            | "ToRepresentative" >> beam.FlatMap(_to_representative)
        )
        near_drops = (
            {_SIGNATURE: signatures, _CANDIDATES: by_representative}
            | "JoinRepresentatives" >> beam.CoGroupByKey()
            | "PickNear" >> beam.FlatMap(_pick_near, self._threshold)
        )
        decisions = (
            (exact[_DROP], near_drops)
            | "AllDrops" >> beam.Flatten()
            # Exact sorts before near, then the smallest kept id: one deterministic decision per id.
            | "OneDecisionPerId" >> beam.CombinePerKey(min)
        )
        routed = (
            {_REFS: sketched[_REFS], _DROP: decisions}
            | "JoinDecisions" >> beam.CoGroupByKey()
            | "Route" >> beam.ParDo(_Route()).with_outputs(DEAD_LETTER, main=OK)
        )
        return {OK: routed[OK], DEAD_LETTER: routed[DEAD_LETTER]}

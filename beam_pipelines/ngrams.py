"""Hashed word n-grams and the benchmark index that decontamination queries (no Beam here).

Words: a text is normalised (`beam_pipelines.text.normalise_text`), lowercased and encoded as UTF-8;
a word is a maximal run of ASCII letters, digits and `_`, or of non-ASCII bytes. Punctuation and
whitespace only separate words, so a benchmark text matches a trajectory text however the two were
spaced, quoted or re-wrapped. Each word is hashed with xxh3-64 (stable across processes and machines,
unlike `hash()`), and n consecutive word hashes are combined with numpy arithmetic into one uint64
per n-gram, so a text costs one C-level split, one xxhash call per word and n vector operations.

The index (`BenchmarkIndex`) holds, for every distinct benchmark turn text with at least n words:
the sorted unique n-gram hashes of all turns, a CSR map from each hash to the turns containing it,
and each turn's count of distinct n-grams. A trajectory's coverage of a turn is the share of the
turn's n-grams found among the trajectory's n-grams: `np.searchsorted` finds the trajectory's
n-grams in the index, the CSR rows give their turns, and one count per turn divided by the turn's
n-gram count is the coverage. Nothing holds a Python set of n-grams.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import xxhash

from beam_pipelines.text import normalise_text

DEFAULT_NGRAM = 13
_WORD_BYTES = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") | set(range(128, 256))
# every byte that is not part of a word becomes a space, so bytes.split() yields the words
_SEPARATE = bytes(b if b in _WORD_BYTES else 0x20 for b in range(256))
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd, so the combination is invertible per step
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)  # splitmix64's finaliser constants
_MIX_2 = np.uint64(0x94D049BB133111EB)
# at most this many (source, sample, turn) references are kept per distinct turn text
MAX_REFS_PER_TURN = 32


def text_words(text: str) -> list[bytes]:
    """The words of `text` (see the module doc), lowercased, as UTF-8 bytes."""
    return normalise_text(text).lower().encode("utf-8", "surrogatepass").translate(_SEPARATE).split()


def word_hashes(words: list[bytes]) -> np.ndarray:
    return np.fromiter(map(xxhash.xxh3_64_intdigest, words), dtype=np.uint64, count=len(words))


def _mix(x: np.ndarray) -> np.ndarray:
    # the polynomial combination is linear; the finaliser spreads every input bit over the output
    x = x ^ (x >> np.uint64(30))
    x = x * _MIX_1
    x = x ^ (x >> np.uint64(27))
    x = x * _MIX_2
    return x ^ (x >> np.uint64(31))


def combine(hashes: np.ndarray, n: int) -> np.ndarray:
    """One hash per run of n consecutive word hashes (len(hashes) - n + 1 of them; none if fewer)."""
    count = len(hashes) - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    acc = hashes[:count].copy()
    for j in range(1, n):
        acc *= _MULTIPLIER  # uint64 arithmetic wraps modulo 2^64, which is what a hash wants
        acc += hashes[j : j + count]
    return _mix(acc)


def text_ngrams(text: str, n: int = DEFAULT_NGRAM) -> np.ndarray:
    """The hashes of the word n-grams of `text`, in order (with repeats); empty below n words."""
    return combine(word_hashes(text_words(text)), n)


def runs_ngrams(hashes: np.ndarray, lengths: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(n-gram hashes, run of each) for word hashes that are several runs (texts) laid end to end,
    `lengths` words each: one `combine` over all of them, the n-grams crossing a run's end left out."""
    grams = combine(hashes, n)
    if len(grams) == 0:
        return grams, np.zeros(0, dtype=np.int64)
    run_of_word = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    ends = np.cumsum(lengths)
    starts = np.arange(len(grams), dtype=np.int64)
    run = run_of_word[: len(grams)]
    inside = starts + n <= ends[run]
    return grams[inside], run[inside]


def ngram_set(texts: Iterable[str], n: int = DEFAULT_NGRAM) -> np.ndarray:
    """Sorted unique n-gram hashes of several texts; no n-gram spans two texts."""
    words: list[bytes] = []
    lengths: list[int] = []
    for text in dict.fromkeys(texts):  # successive screens are often identical
        ws = text_words(text)
        if len(ws) >= n:
            words += ws
            lengths.append(len(ws))
    if not words:
        return np.zeros(0, dtype=np.uint64)
    grams, _ = runs_ngrams(word_hashes(words), np.asarray(lengths, dtype=np.int64), n)
    return np.unique(grams)


@dataclass(frozen=True)
class TurnRef:
    """Where a benchmark turn text occurs: source index, sample id, 1-based turn, kind, domain."""

    source: int
    sample_id: str
    turn: int
    kind: str  # "action" or "observation" (or "text" for a plain file's paragraph)
    domain: str


@dataclass
class SourceStats:
    """What one benchmark source gave the index."""

    label: str
    samples: int = 0
    turns: int = 0  # turn texts read
    short_turns: int = 0  # fewer than n words: no n-gram, skipped
    ngrams: int = 0  # distinct n-grams of each of its distinct turn texts, summed

    def to_json(self) -> dict:
        return {
            "source": self.label,
            "samples": self.samples,
            "turns": self.turns,
            "short_turns_skipped": self.short_turns,
            "ngrams": self.ngrams,
        }


@dataclass
class BenchmarkIndex:
    n: int
    hashes: np.ndarray  # uint64, sorted, unique
    # len(hashes) + 1 entries: the turns of hashes[i] are postings[offsets[i]:offsets[i+1]]
    offsets: np.ndarray
    postings: np.ndarray  # int32 turn ids
    turn_ngrams: np.ndarray  # int32: distinct n-grams per turn
    refs: list[tuple[TurnRef, ...]]  # per turn
    sources: list[SourceStats] = field(default_factory=list)
    # a one-hash Bloom filter over the top bits of `hashes`: most n-grams of a trajectory are in no
    # benchmark, and one bit test per n-gram is far cheaper than a binary search that misses the
    # cache at every step of a large index
    filter_bits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    filter_shift: np.uint64 = np.uint64(64)

    def __post_init__(self) -> None:
        if len(self.filter_bits) == 0 and len(self.hashes):
            # about 16 bits per hash (6% false positives), as a power of two between 2^16 and 2^30
            log2 = min(max(int(np.ceil(np.log2(16 * len(self.hashes)))), 16), 30)
            self.filter_shift = np.uint64(64 - log2)
            present = np.zeros(1 << log2, dtype=bool)
            present[self.hashes >> self.filter_shift] = True
            self.filter_bits = np.packbits(present, bitorder="little")

    @property
    def nbytes(self) -> int:
        arrays = (self.hashes, self.offsets, self.postings, self.turn_ngrams, self.filter_bits)
        return sum(a.nbytes for a in arrays)

    def _maybe_present(self, grams: np.ndarray) -> np.ndarray:
        slot = grams >> self.filter_shift
        return (self.filter_bits[slot >> np.uint64(3)] >> (slot & np.uint64(7)).astype(np.uint8)) & 1 == 1

    def coverage(self, grams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(turn ids, coverage) of every turn sharing an n-gram with `grams` (sorted unique hashes)."""
        if len(grams) == 0 or len(self.hashes) == 0:
            return np.zeros(0, np.int32), np.zeros(0)
        grams = grams[self._maybe_present(grams)]
        at = np.searchsorted(self.hashes, grams)
        at[at == len(self.hashes)] = 0
        hit = at[self.hashes[at] == grams]
        if len(hit) == 0:
            return np.zeros(0, np.int32), np.zeros(0)
        starts, stops = self.offsets[hit], self.offsets[hit + 1]
        lengths = stops - starts
        # the concatenation of the CSR rows, without a Python loop: position k of row r is
        # starts[r] + (k - where row r begins in the output)
        row_begin = np.cumsum(lengths) - lengths
        take = np.repeat(starts - row_begin, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
        turns, matched = np.unique(self.postings[take], return_counts=True)
        return turns, matched / self.turn_ngrams[turns]

    def contaminating(self, grams: np.ndarray, threshold: float) -> list[tuple[int, float]]:
        """(turn id, coverage) of the turns covered at least `threshold`, best first."""
        turns, coverage = self.coverage(grams)
        keep = coverage >= threshold
        order = np.lexsort((turns[keep], -coverage[keep]))
        return [(int(turns[keep][i]), float(coverage[keep][i])) for i in order]

    def dumps(self) -> bytes:
        return pickle.dumps(self, protocol=5)

    @staticmethod
    def loads(data: bytes) -> BenchmarkIndex:
        index = pickle.loads(data)
        if not isinstance(index, BenchmarkIndex):
            raise TypeError(f"not a benchmark index: {type(index).__name__}")
        return index


class IndexBuilder:
    """Benchmark turn texts in, one `BenchmarkIndex` out. Identical turn texts (the same turn quoted
    by several samples of one trajectory) are indexed once and keep all their references. The words
    of new turns are kept as one joined byte string each; `build` hashes and combines all of them in
    one pass, because per-turn numpy calls cost more than the arithmetic on a benchmark's size."""

    def __init__(self, n: int = DEFAULT_NGRAM) -> None:
        if n < 1:
            raise ValueError(f"n-gram length must be at least 1, got {n}")
        self.n = n
        self.sources: list[SourceStats] = []
        self._turn_of: dict[bytes, int] = {}
        self._words: list[bytes] = []  # per turn: its words joined by spaces
        self._lengths: list[int] = []  # per turn: its word count
        self._refs: list[list[TurnRef]] = []
        self._source_turns: list[set[int]] = []

    def add_source(self, label: str) -> int:
        self.sources.append(SourceStats(label))
        self._source_turns.append(set())
        return len(self.sources) - 1

    def add(self, text: str, ref: TurnRef) -> bool:
        """Index one turn text; False when it has fewer than n words (skipped)."""
        stats = self.sources[ref.source]
        stats.turns += 1
        words = text_words(text)
        if len(words) < self.n:
            stats.short_turns += 1
            return False
        joined = b" ".join(words)
        key = xxhash.xxh3_128_digest(joined)
        turn = self._turn_of.get(key)
        if turn is None:
            turn = self._turn_of[key] = len(self._words)
            self._words.append(joined)
            self._lengths.append(len(words))
            self._refs.append([])
        self._source_turns[ref.source].add(turn)
        if len(self._refs[turn]) < MAX_REFS_PER_TURN:
            self._refs[turn].append(ref)
        return True

    def build(self) -> BenchmarkIndex:
        lengths = np.asarray(self._lengths, dtype=np.int64)
        grams, turn = runs_ngrams(word_hashes(b" ".join(self._words).split()), lengths, self.n)
        # stable: within one hash the turns stay in increasing order, so a turn's repeats of an
        # n-gram are neighbours and one comparison removes them
        order = np.argsort(grams, kind="stable")
        grams, turn = grams[order], turn[order]
        distinct = np.ones(len(grams), dtype=bool)
        distinct[1:] = (grams[1:] != grams[:-1]) | (turn[1:] != turn[:-1])
        grams, turn = grams[distinct], turn[distinct]
        row_start = np.ones(len(grams), dtype=bool)
        row_start[1:] = grams[1:] != grams[:-1]
        first = np.flatnonzero(row_start)
        turn_ngrams = np.bincount(turn, minlength=len(lengths)).astype(np.int32)
        for stats, turns in zip(self.sources, self._source_turns, strict=True):
            stats.ngrams = int(turn_ngrams[list(turns)].sum())
        # offsets index the postings: 32 bits suffice below 2^31 postings, and halve their size
        offset_type = np.int32 if len(grams) < 2**31 else np.int64
        return BenchmarkIndex(
            n=self.n,
            hashes=grams[first],
            offsets=np.append(first, len(grams)).astype(offset_type),
            postings=turn.astype(np.int32),
            turn_ngrams=turn_ngrams,
            refs=[tuple(r) for r in self._refs],
            sources=self.sources,
        )

"""Pure text helpers for the corpus stages: normalisation, volatile-value masking, MinHash.

Nothing here imports Beam, so every rule is unit-testable on plain strings. The regular
expressions are compiled once at import; each helper makes one pass over its text where it can,
because these run on every observation of every trajectory. Redaction is in
`beam_pipelines.secret_rules` (finding) and `beam_pipelines.redaction` (replacing).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import numpy as np
import xxhash

from schemas.records import Trajectory

# --- normalisation ------------------------------------------------------------------------------

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), DCS/SOS/PM/APC strings, charset designations,
# and the remaining two-byte escapes; the 8-bit CSI form too.
_CONTROL_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[()*+][0-9A-Za-z]"
    r"|\x1b[=>78@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
_TRAILING_SPACE = re.compile(r"[ \t]+$", re.MULTILINE)


def is_screen(observation_format: str) -> bool:
    """A rendered screen (e.g. "terminal_screen"), where trailing blanks are padding, not content."""
    return observation_format.endswith("screen")


def strip_control_sequences(text: str) -> str:
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _CONTROL_SEQUENCE.sub("", text)


def normalise_text(text: str, *, screen: bool = False) -> str:
    """NFC, LF line endings, no terminal control sequences; on screens, no trailing blanks.

    Each rule is guarded by a cheap test, so already-clean text (the common case) is returned as is.
    """
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = strip_control_sequences(text)
    if screen and (" \n" in text or "\t\n" in text or text.endswith((" ", "\t"))):
        text = _TRAILING_SPACE.sub("", text)
    return text


# --- volatile values (dedup only) ---------------------------------------------------------------

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
_VOLATILE = re.compile(
    r"(?P<UUID>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|(?P<TS>\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}\b)?)"
    r"|(?P<TMP>/tmp/tmp\.\w+|\btmp[a-z0-9_]{8}\b)"
    rf"|(?P<DATE>\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b|\b{_MONTH} +\d{{1,2}}\b"
    rf"|\b\d{{1,2}} {_MONTH} \d{{4}}\b|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\b)"
    r"|(?P<TIME>\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b)"
    # PIDs: job-control "[1] 12345", "pid=123"/"PID 123", ps rows ("  123 pts/0 ..." and
    # "user 123 0.0 0.1 ...").
    r"|(?P<PID>(?<=\[\d\] )\d+|(?<=\[\d\d\] )\d+|(?<=pid=)\d+|(?<=pid )\d+|(?<=PID )\d+|(?<=pid: )\d+"
    r"|^ *\d+(?= +(?:pts/|tty|\?))|^[a-z_][\w-]* +\d+(?= +\d+\.\d +\d+\.\d))"
    r"|(?P<HEX>\b0x[0-9a-fA-F]{4,}\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b)"
    r"|(?P<NUM>\b\d{5,}\b)",
    re.MULTILINE,
)


def _volatile_placeholder(match: re.Match[str]) -> str:
    # ps aux rows keep their user column: only the PID is volatile.
    text = match.group()
    if match.lastgroup == "PID" and not text.lstrip().isdigit():
        return text.split()[0] + " <PID>"
    return f"<{match.lastgroup}>"


_MAY_BE_VOLATILE = re.compile(r"\d|tmp")


def mask_volatile(text: str) -> str:
    """Timestamps, dates, times, PIDs, temp names, UUIDs, hex ids and long numbers as placeholders."""
    return _VOLATILE.sub(_volatile_placeholder, text) if _MAY_BE_VOLATILE.search(text) else text


def dedup_key_text(t: Trajectory, cache: dict[str, str] | None = None) -> str:
    """The trajectory's actions and observations with volatile values masked, for dedup only.

    Masked line by line through `cache` (line -> masked line; pass one in to share it across
    trajectories): successive screens repeat most of their lines, and a dictionary hit is far
    cheaper than another regex pass.
    """
    if cache is None:
        cache = {}
    parts = [t.initial_observation.text]
    for step in t.steps:
        parts.append(step.action.text)
        parts.append(step.observation.text)
    lines = "\x1e".join(parts).split("\n")
    for i, line in enumerate(lines):
        masked = cache.get(line)
        if masked is None:
            masked = cache[line] = mask_volatile(line)
        lines[i] = masked
    return "\n".join(lines)


def exact_key(text: str) -> bytes:
    """128 bits of the text's SHA-256: equal keys mean equal texts, short enough to store per sketch."""
    return hashlib.sha256(text.encode()).digest()[:16]


# --- MinHash ------------------------------------------------------------------------------------

_PRIME = (1 << 31) - 1


def shingle_hashes(text: str, k: int = 5) -> np.ndarray:
    """Stable 32-bit hashes of the word k-grams of each distinct line (a line of k words or fewer
    is one shingle). Per distinct line because successive screens repeat their lines: the set is
    the same as over the whole text but for k-grams spanning line breaks, at a fraction of the cost.
    xxhash, unlike `hash()`, is not salted per process, so every worker gets the same signature."""
    grams: set[str] = set()
    for line in set(text.split("\n")):
        words = line.split()
        if len(words) <= k:
            grams.add(" ".join(words))
        else:
            grams.update(" ".join(words[i : i + k]) for i in range(len(words) - k + 1))
    return np.fromiter((xxhash.xxh32_intdigest(g.encode()) for g in grams), dtype=np.uint64, count=len(grams))


class MinHasher:
    """num_perm universal hashes (a*x + b) mod p with p = 2^31-1, seeded, so signatures are
    reproducible. With a, b and x below p, a*x + b fits uint64 and the modulus wraps many times,
    which is what makes the permutations independent of x's order."""

    def __init__(self, num_perm: int = 64, seed: int = 1) -> None:
        rng = np.random.default_rng(seed)
        self.num_perm = num_perm
        self._a = rng.integers(1, _PRIME, size=(num_perm, 1), dtype=np.uint64)
        self._b = rng.integers(0, _PRIME, size=(num_perm, 1), dtype=np.uint64)

    def signature(self, hashes: np.ndarray) -> bytes:
        """The signature as bytes: compact to ship through a shuffle, sliceable into bands."""
        x = hashes[np.newaxis, :] % np.uint64(_PRIME)
        values = (self._a * x + self._b) % np.uint64(_PRIME)
        return values.min(axis=1).astype(np.uint32).tobytes()


def estimated_jaccard(a: bytes, b: bytes) -> float:
    return float(np.mean(np.frombuffer(a, dtype=np.uint32) == np.frombuffer(b, dtype=np.uint32)))


def bands(signature: bytes, count: int) -> list[bytes]:
    width = len(signature) // count
    return [signature[i * width : (i + 1) * width] for i in range(count)]

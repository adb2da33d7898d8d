"""Rows of a public dataset, streamed from a local copy or any fsspec URI.

JSON Lines (plain or compressed: .gz, .bz2, .xz; and a .json file that does not hold an array) are
read here line by line, so a line that is not JSON is one bad row (it goes to the dead-letter file)
instead of the end of the file. A JSON file holding one array of rows (Mind2Web's raw release:
hundreds of MB each) is parsed incrementally with ijson, an item at a time. Parquet (what the Hub
stores and converts every dataset to) is read a batch at a time with pyarrow's streaming reader, the
one `datasets` uses underneath: through `datasets`' streaming mode the peak RSS of an import was 700
MB for 100,000 small rows and grew 23-33% to 400,000 (it opens a fragment per row group), against a
flat 100 MB this way. Arrow and CSV files go through `datasets` in streaming mode (JSON went there
too until a .json file nested 100,000 deep crashed its reader with a segmentation fault, before any
limit could be checked). A local snapshot of a Hub dataset (`huggingface-cli download --repo-type
dataset`) is a folder of such files; `hf://datasets/...` and other fsspec URIs read the same way.

Hostile or damaged files are dead letters, never the end of the run, and memory stays bounded:
- a row (a JSON line, an item of a JSON array, a whole `.traj`/`.cast` file) over `MAX_ROW_BYTES`
  (128 MiB) is refused as its bytes stream by, never held whole;
- a row nesting more than `MAX_DEPTH` (256) arrays/objects is refused before it is parsed (a JSON
  line) or while it is (a JSON array's item: ijson events, counted), so no parser recurses or builds
  100,000 levels;
- a line that is not UTF-8, or whose JSON escapes name an unpaired UTF-16 surrogate, is one bad row;
- a compressed stream that is truncated or corrupt, or any file that fails part-way (a corrupt Parquet
  file, a read error), ends only that file: the rows before the failure are imported, one dead letter
  names the file and the error, and the next file is read.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import posixpath
import re
import zlib
from collections.abc import Callable, Iterator
from typing import IO, Any, NamedTuple

import numpy as np
from fsspec.core import url_to_fs

# `datasets` builder for each file kind it reads; JSON Lines and .json are read here (see the module doc).
BUILDERS = {".arrow": "arrow", ".csv": "csv"}
PARQUET = (".parquet",)
# What `datasets.save_to_disk` and Hub snapshots keep beside the data: never rows.
METADATA_FILES = frozenset({"dataset_info.json", "dataset_infos.json", "state.json", "dataset_dict.json"})
# Compressed JSON Lines: the standard library's readers, each raising EOFError on a truncated stream.
DECOMPRESSORS: dict[str, Callable[[IO[bytes]], IO[bytes]]] = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    ".bz2": lambda raw: bz2.BZ2File(raw, "rb"),
    ".xz": lambda raw: lzma.LZMAFile(raw, "rb"),
}
JSON_LINES = tuple(f"{kind}{c}" for kind in (".jsonl", ".ndjson") for c in ("", *DECOMPRESSORS))

MAX_DEPTH = 256  # arrays/objects open at once in one row; real datasets nest a few dozen at most
MAX_ROW_BYTES = 128 * 2**20  # one row's bytes; the largest real rows (Mind2Web tasks) are tens of MB
# What reading a file can raise part-way: I/O, decompression, decoding and parser errors. Anything
# else (a missing extra, a bug) still ends the run, so it is seen and fixed.
FILE_ERRORS = (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError, RecursionError)
_CHUNK = 1 << 20
_ONLY_BRACKETS = str.maketrans("", "", "".join(chr(c) for c in range(128) if chr(c) not in "[]{}"))
_BRACKET_STEP = np.zeros(256, dtype=np.int64)  # by byte: +1 opens, -1 closes
_BRACKET_STEP[[ord("["), ord("{")]] = 1
_BRACKET_STEP[[ord("]"), ord("}")]] = -1
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class Unreadable(NamedTuple):
    """A record the input holds but that cannot be parsed; the driver dead-letters it."""

    reason: str
    text: str


class InputError(ValueError):
    """An input that names no readable data (missing path, no data files, unknown file kind)."""


class RowRefused(ValueError):
    """A row over a documented limit (nesting, size) or not valid Unicode; the message says which."""


def display_name(uri: str) -> str:
    return posixpath.basename(uri.rstrip("/")) or uri


def data_files(source: str, suffixes: tuple[str, ...]) -> list[str]:
    """The files `source` names (a file, a folder searched recursively, or a glob), as URIs, sorted;
    only those ending in one of `suffixes`."""
    fs, path = url_to_fs(source)
    if set("*?[") & set(path):
        found = fs.glob(path)
    elif fs.isdir(path):
        found = fs.find(path)
    elif fs.exists(path):
        found = [path]
    else:
        raise InputError(f"{source} does not exist; give a file, a folder or a glob")
    files = sorted(
        p
        for p in found
        if p.lower().endswith(suffixes) and posixpath.basename(p) not in METADATA_FILES and not fs.isdir(p)
    )
    if not files:
        raise InputError(f"{source} holds no {'/'.join(suffixes)} files")
    return [fs.unstrip_protocol(p) if "://" in source else p for p in files]


def stream_rows(source: str) -> Iterator[tuple[int, str, Any]]:
    """(index within its file, file URI, row) for every row of every data file `source` names. A file
    that fails part-way ends with one `Unreadable` naming the error; the next file is still read."""
    for uri in data_files(source, (*JSON_LINES, ".json", *PARQUET, *BUILDERS)):
        index = 0
        try:
            for row in _file_rows(uri):
                yield index, uri, row
                index += 1
        except FILE_ERRORS as exc:
            reason = f"reading the file failed after {index} rows, the rest is not read: {_error(exc)}"
            yield index, uri, Unreadable(reason, "")


def _file_rows(uri: str) -> Iterator[Any]:
    lower = uri.lower()
    if lower.endswith(JSON_LINES):
        return json_lines(uri)
    if lower.endswith(".json"):  # an array of rows, or JSON Lines named .json
        head = _head(uri)
        if head.startswith(b"["):
            return json_array(uri)
        if head.split(b"\n", 1)[0].strip() == b"{":  # one object, pretty-printed: each line a bad row
            reason = "the file holds one JSON object over many lines, not rows (give JSON Lines or an array)"
            return iter([Unreadable(reason, head[:2000].decode("utf-8", "backslashreplace"))])
        return json_lines(uri)
    if lower.endswith(PARQUET):
        return parquet_rows(uri)
    return dataset_rows(uri)


def _error(exc: BaseException) -> str:
    if isinstance(exc, EOFError):  # what gzip, bz2 and lzma say of a stream that stops short
        return f"the compressed stream is truncated ({exc})"
    if isinstance(exc, zlib.error | lzma.LZMAError | gzip.BadGzipFile):
        return f"the compressed data is corrupt ({exc})"
    return f"{type(exc).__name__}: {exc}"


def loads(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads, refusing (RowRefused) a value nesting deeper than `max_depth` before parsing it,
    and one whose escapes decode to an unpaired surrogate (no UTF-8 encoding, so no Parquet string)."""
    # Counting brackets is a C-speed upper bound on the depth; only rows above it get the exact scan.
    if text.count("[") + text.count("{") > max_depth and nesting(text) > max_depth:
        raise RowRefused(f"nests deeper than {max_depth} arrays/objects (the limit)")
    try:
        value = json.loads(text)
    except RecursionError:  # a caller deep in its own stack; the scan above keeps rows well short
        raise RowRefused(f"nests too deep to parse (the limit is {max_depth})") from None
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RowRefused(f"holds an unpaired UTF-16 surrogate escape, not Unicode text: {exc}") from None
    return value


def parse_json(text: str, what: str, error: Callable[[str], Exception]) -> Any:
    """`loads`, its refusal or json's own error raised as `error` with a message about `what`
    ("line 1: the header"): the importers' one wording for a JSON value they cannot read."""
    try:
        return loads(text)
    except RowRefused as exc:
        raise error(f"{what} {exc}") from None
    except ValueError as exc:
        raise error(f"{what} is not JSON: {exc}") from None


def nesting(text: str) -> int:
    """The deepest nesting of arrays/objects in JSON text, brackets inside strings not counted."""
    # Escaped backslashes, then escaped quotes, out: every quote left opens or closes a string, so
    # the odd pieces between quotes are the strings. All in C: a regex over the strings was 3x slower.
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    outside = "".join(text.split('"')[::2])
    # Outside strings valid JSON is ASCII; what else is there is no bracket.
    brackets = outside.translate(_ONLY_BRACKETS).encode("ascii", "ignore")
    if not brackets:
        return 0
    return int(np.cumsum(_BRACKET_STEP[np.frombuffer(brackets, dtype=np.uint8)]).max())


def json_lines(uri: str, max_bytes: int = MAX_ROW_BYTES, max_depth: int = MAX_DEPTH) -> Iterator[Any]:
    """Each non-blank line's JSON value, or `Unreadable` for a line that is not UTF-8 JSON or is over
    a limit. A truncated or corrupt compressed stream ends the file with one `Unreadable`."""
    fs, path = url_to_fs(uri)
    decompress = next((d for suffix, d in DECOMPRESSORS.items() if path.lower().endswith(suffix)), None)
    with fs.open(path, "rb") as raw:
        stream = decompress(raw) if decompress else raw
        number = 0
        try:
            for number, line in enumerate(split_lines(stream, max_bytes), 1):
                value = _json_line(number, line, max_bytes, max_depth)
                if value is not _BLANK:
                    yield value
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            reason = f"reading stops in line {number + 1}, the rest of the file is not read: {_error(exc)}"
            yield Unreadable(reason, "")
        finally:
            if stream is not raw:
                stream.close()


_BLANK = object()  # a blank line: no row


def _json_line(number: int, line: bytes | int, max_bytes: int, max_depth: int) -> Any:
    if isinstance(line, int):
        return Unreadable(f"line {number} is {line:,} bytes, over the {max_bytes:,}-byte limit", "")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Unreadable(f"line {number} is not UTF-8 text: {exc}", _shown(line))
    if number == 1:
        text = text.removeprefix("\ufeff")  # the byte-order mark some Windows tools write
    if not text.strip():
        return _BLANK
    try:
        return loads(text, max_depth)
    except RowRefused as exc:
        return Unreadable(f"line {number} {exc}", _shown(line))
    except ValueError as exc:
        return Unreadable(f"line {number} is not JSON: {exc}", _shown(line))


def _shown(line: bytes) -> str:
    """The start of a refused line for the dead-letter file, bytes that are not UTF-8 escaped."""
    return line[:2000].decode("utf-8", "backslashreplace")


def split_lines(stream: IO[bytes], max_bytes: int) -> Iterator[bytes | int]:
    """The lines of a binary stream, newline dropped; for a line over `max_bytes` its size (an int)
    instead: its bytes are skipped as they stream by, never held."""
    # read1: what the decompressor has, not a full chunk, which a truncated stream would never give
    # (read() raises on the cut and loses the lines decompressed before it).
    read = getattr(stream, "read1", stream.read)
    held = bytearray()
    skipped = 0  # > 0 while skipping an oversize line: its bytes so far
    while chunk := read(_CHUNK):
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            size = skipped + len(held) + end - start
            if skipped or size > max_bytes:
                yield size
            elif held:
                held += chunk[start:end]
                yield bytes(held)
            else:
                yield chunk[start:end]
            held.clear()
            skipped, start = 0, end + 1
        rest = len(chunk) - start
        if skipped or len(held) + rest > max_bytes:
            skipped += len(held) + rest
            held.clear()
        else:
            held += chunk[start:]
    if skipped:
        yield skipped
    elif held:
        yield bytes(held)


def _head(uri: str) -> bytes:
    """The file's first 4 KiB, byte-order mark and leading blanks dropped."""
    fs, path = url_to_fs(uri)
    with fs.open(path, "rb") as handle:
        return handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")


class _Counted:
    """A binary file as ijson reads it, counting the bytes since `mark`: past `limit`, the next read
    raises RowRefused, so one huge item (or one huge string in it) never sits whole in the parser."""

    def __init__(self, handle: IO[bytes], limit: int) -> None:
        self._handle, self._limit = handle, limit
        self.position = self.mark = 0

    def read(self, size: int = -1) -> bytes:
        if self.position - self.mark > self._limit:
            raise RowRefused(f"over the {self._limit:,}-byte limit")
        data = self._handle.read(size)
        self.position += len(data)
        return data


def json_array(uri: str, max_bytes: int = MAX_ROW_BYTES, max_depth: int = MAX_DEPTH) -> Iterator[Any]:
    """The items of a top-level JSON array, parsed as they stream by. An item nesting deeper than
    `max_depth` is one `Unreadable` (its events are counted, not built) and the items after it are
    read; a syntax error or an item over `max_bytes` ends the file with one `Unreadable` (the parser
    cannot find the next item after it)."""
    import ijson  # the importers extra

    fs, path = url_to_fs(uri)
    with fs.open(path, "rb") as handle:
        counted = _Counted(handle, max_bytes)
        events = ijson.basic_parse(counted, use_float=True)
        items = 0
        try:
            for item in _array_items(events, max_depth, counted):
                yield item
                items += 1
        except RowRefused as exc:
            yield Unreadable(f"item {items + 1} of the array is {exc}; the rest of the file is not read", "")
        except ijson.JSONError as exc:
            yield Unreadable(f"the JSON array breaks off after the rows before this one: {exc}", "")


def _array_items(events: Iterator[tuple[str, Any]], max_depth: int, counted: _Counted) -> Iterator[Any]:
    import ijson

    depth = 0  # 1 inside the top-level array, 2 inside an item that is an array or object
    builder: Any = None
    too_deep = False
    for event, value in events:
        if depth == 0:
            if event != "start_array":
                raise ijson.JSONError(f"expected an array at the top, got {event}")
            depth = 1
            counted.mark = counted.position
            continue
        if event in ("start_map", "start_array"):
            depth += 1
            too_deep = too_deep or depth - 1 > max_depth
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                return  # the array's end
        if too_deep:  # count the events until the item closes; build nothing
            if depth == 1:
                yield Unreadable(f"the item nests deeper than {max_depth} arrays/objects (the limit)", "")
                too_deep, builder = False, None
                counted.mark = counted.position
            continue
        if builder is None:
            builder = ijson.ObjectBuilder()
        builder.event(event, value)
        if depth == 1:  # a scalar item, or the end of a container item
            yield builder.value
            builder = None
            counted.mark = counted.position


def parquet_rows(uri: str, batch_rows: int = 256) -> Iterator[dict[str, Any]]:
    """The rows of one Parquet file, a batch of `batch_rows` at a time."""
    import pyarrow.parquet as pq

    fs, path = url_to_fs(uri)
    with fs.open(path, "rb") as handle:
        for batch in pq.ParquetFile(handle).iter_batches(batch_size=batch_rows):
            yield from batch.to_pylist()


def dataset_rows(uri: str, batch_rows: int = 256) -> Iterator[dict[str, Any]]:
    """The rows of one Arrow/CSV/JSON file through `datasets`' streaming reader, as Arrow batches
    turned into rows here (row by row, its stream grew the peak RSS with the rows read)."""
    import datasets  # the importers extra; loaded only for the file kinds that need it

    builder = next(b for suffix, b in BUILDERS.items() if uri.lower().endswith(suffix))
    datasets.logging.set_verbosity_error()
    stream = datasets.load_dataset(builder, data_files={"rows": uri}, split="rows", streaming=True)
    for batch in stream.with_format("arrow").iter(batch_size=batch_rows):
        yield from batch.to_pylist()


def file_records(
    source: str, suffixes: tuple[str, ...], max_bytes: int = MAX_ROW_BYTES
) -> Iterator[tuple[str, bytes | Unreadable]]:
    """(URI, bytes) per file, for formats of one recording per file (`.traj`, `.cast`); a file over
    `max_bytes` is `Unreadable` (read no further than the limit)."""
    for uri in data_files(source, suffixes):
        fs, path = url_to_fs(uri)
        try:
            with fs.open(path, "rb") as handle:
                content = handle.read(max_bytes + 1)
        except OSError as exc:
            yield uri, Unreadable(f"cannot read the file: {exc}", "")
            continue
        if len(content) > max_bytes:
            yield uri, Unreadable(f"the file is over the {max_bytes:,}-byte limit", "")
        else:
            yield uri, content

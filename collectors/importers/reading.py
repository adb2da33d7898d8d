"""Rows of a public dataset, streamed from a local copy or any fsspec URI.

JSON Lines are read here line by line, so a line that is not JSON is one bad row (it goes to the
dead-letter file) instead of the end of the file. A JSON file holding one array of rows (Mind2Web's
raw release: hundreds of MB each) is parsed incrementally with ijson, an item at a time. Parquet (what
the Hub stores and converts every dataset to) is read a batch at a time with pyarrow's streaming
reader, the one `datasets` uses underneath: through `datasets`' streaming mode the peak RSS of an
import was 700 MB for 100,000 small rows and grew 23-33% to 400,000 (it opens a fragment per row
group), against a flat 100 MB this way. Arrow, CSV and JSON files holding anything but an array go
through `datasets` in streaming mode. A local snapshot of a Hub dataset (`huggingface-cli download
--repo-type dataset`) is a folder of such files; `hf://datasets/...` and other fsspec URIs read the
same way.
"""

from __future__ import annotations

import gzip
import json
import posixpath
from collections.abc import Iterator
from typing import Any, NamedTuple

from fsspec.core import url_to_fs

# `datasets` builder for each file kind it reads; .jsonl is read here (see the module doc).
BUILDERS = {".arrow": "arrow", ".csv": "csv", ".json": "json"}
PARQUET = (".parquet",)
# What `datasets.save_to_disk` and Hub snapshots keep beside the data: never rows.
METADATA_FILES = frozenset({"dataset_info.json", "dataset_infos.json", "state.json", "dataset_dict.json"})
JSON_LINES = (".jsonl", ".jsonl.gz", ".ndjson")


class Unreadable(NamedTuple):
    """A record the input holds but that cannot be parsed; the driver dead-letters it."""

    reason: str
    text: str


class InputError(ValueError):
    """An input that names no readable data (missing path, no data files, unknown file kind)."""


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
    """(index within its file, file URI, row) for every row of every data file `source` names."""
    for uri in data_files(source, (*JSON_LINES, *PARQUET, *BUILDERS)):
        if uri.lower().endswith(JSON_LINES):
            yield from ((i, uri, row) for i, row in enumerate(json_lines(uri)))
        elif uri.lower().endswith(".json") and _starts_with_array(uri):
            yield from ((i, uri, row) for i, row in enumerate(json_array(uri)))
        elif uri.lower().endswith(PARQUET):
            yield from ((i, uri, row) for i, row in enumerate(parquet_rows(uri)))
        else:
            yield from ((i, uri, row) for i, row in enumerate(dataset_rows(uri)))


def json_lines(uri: str) -> Iterator[Any]:
    """Each non-blank line's JSON value, or `Unreadable` for a line that is not JSON."""
    fs, path = url_to_fs(uri)
    with fs.open(path, "rb") as raw:
        stream = gzip.open(raw, "rt", encoding="utf-8") if path.endswith(".gz") else None
        lines = stream if stream is not None else (line.decode("utf-8", "replace") for line in raw)
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except ValueError as exc:
                yield Unreadable(f"line {number} is not JSON: {exc}", line[:2000])


def _starts_with_array(uri: str) -> bool:
    fs, path = url_to_fs(uri)
    with fs.open(path, "rb") as handle:
        head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


def json_array(uri: str) -> Iterator[Any]:
    """The items of a top-level JSON array, parsed as they stream by. A syntax error ends the file
    with one `Unreadable` (a parser cannot find the next item after it)."""
    import ijson  # the importers extra

    fs, path = url_to_fs(uri)
    with fs.open(path, "rb") as handle:
        items = ijson.items(handle, "item", use_float=True)
        try:
            yield from items
        except ijson.JSONError as exc:
            yield Unreadable(f"the JSON array breaks off after the rows before this one: {exc}", "")


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


def file_records(source: str, suffixes: tuple[str, ...]) -> Iterator[tuple[str, bytes | Unreadable]]:
    """(URI, bytes) per file, for formats of one recording per file (`.traj`, `.cast`)."""
    for uri in data_files(source, suffixes):
        fs, path = url_to_fs(uri)
        try:
            with fs.open(path, "rb") as handle:
                yield uri, handle.read()
        except OSError as exc:
            yield uri, Unreadable(f"cannot read the file: {exc}", "")

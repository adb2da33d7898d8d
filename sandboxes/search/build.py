"""Build the embedded search corpus: a tantivy index plus the pages it points to, in one directory.

    DIR/index/           the tantivy index (url, title, body, date, source)
    DIR/site/<host>/...  every page a result links to, served by the sandbox's loopback server
    DIR/manifest.json    written last: its presence marks a finished build

A build goes to a temporary sibling directory and is renamed into place, so a crash or a second
builder never leaves a half-built index where a sandbox would open it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy
from tqdm import tqdm

from sandboxes.cache import cache_root
from sandboxes.search.corpus import Page, man_pages, python_doc_pages
from sandboxes.search.engines import INDEX_SUBDIR, build_schema

MANIFEST = "manifest.json"
TOPICS = "topics.txt"  # what the documents are about, one a line: seeds for explorer queries
SITE_SUBDIR = "site"
# Bumped whenever the same BuildParams would cut a different corpus: cached indexes then rebuild.
FORMAT_VERSION = 2
DEFAULT_PYTHON_DOCS = "/usr/share/doc/python3.11/html"
DEFAULT_MAN_PAGES = "/usr/share/man"
DEFAULT_LIMIT = 2000
# Python sections are cheap to cut and many; manual pages cost a mandoc run each.
SOURCE_WEIGHTS = {"python-docs": 3, "man-pages": 1}


@dataclass(frozen=True)
class BuildParams:
    python_docs: str = DEFAULT_PYTHON_DOCS  # "" leaves the source out
    man_pages: str = DEFAULT_MAN_PAGES
    limit: int = DEFAULT_LIMIT  # documents in all; 0: every document of every source
    seed: int = 0

    def key(self) -> str:
        recipe = {**dataclasses.asdict(self), "format": FORMAT_VERSION}
        return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def default_index_dir(params: BuildParams) -> Path:
    return cache_root() / "search-index" / params.key()


def load_manifest(index_dir: str | Path) -> dict[str, Any] | None:
    path = Path(index_dir) / MANIFEST
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def ensure_index(out: str | Path, params: BuildParams, progress: bool = False) -> dict[str, Any]:
    """The manifest of the index at `out`, building it first unless one with `params` is there."""
    manifest = load_manifest(out)
    if (
        manifest is not None
        and manifest.get("build") == dataclasses.asdict(params)
        and manifest.get("format") == FORMAT_VERSION
    ):
        return manifest
    return build_index(out, params, progress=progress, force=manifest is not None)


def _sources(params: BuildParams) -> dict[str, Iterator[Page]]:
    sources: dict[str, Iterator[Page]] = {}
    if params.python_docs:
        sources["python-docs"] = python_doc_pages(params.python_docs, params.seed)
    if params.man_pages:
        sources["man-pages"] = man_pages(params.man_pages, params.seed)
    if not sources:
        raise ValueError("no document source: give --python-docs and/or --man-pages")
    return sources


def _interleave(sources: dict[str, Iterator[Page]], limit: int) -> Iterator[Page]:
    """Pages from every source in SOURCE_WEIGHTS proportion of documents, up to `limit` documents."""
    taken: Counter[str] = Counter()
    live = dict(sources)
    total = 0
    while live and (limit <= 0 or total < limit):
        name = min(live, key=lambda n: (taken[n] / SOURCE_WEIGHTS.get(n, 1), n))
        page = next(live[name], None)
        if page is None:
            del live[name]
            continue
        if limit > 0 and total + len(page.docs) > limit:
            page.docs = page.docs[: limit - total]
        taken[name] += len(page.docs)
        total += len(page.docs)
        yield page


def build_index(
    out: str | Path, params: BuildParams, progress: bool = True, force: bool = False
) -> dict[str, Any]:
    """Build the corpus at `out` and return its manifest. An existing finished index is replaced
    only with `force`; FileExistsError otherwise."""
    target = Path(out)
    if load_manifest(target) is not None and not force:
        raise FileExistsError(f"{target} already holds a search index; pass --force to rebuild it")
    if target.exists() and load_manifest(target) is None and any(target.iterdir()):
        raise FileExistsError(f"{target} exists and is not a search index; choose an empty or new directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))
    try:
        manifest = _build_into(work, params, progress)
        if target.exists() and not force and any(target.iterdir()):
            # Another builder finished first: keep its index (a sandbox may already use it).
            existing = load_manifest(target)
            if existing is None or existing.get("build") != manifest["build"]:
                raise FileExistsError(f"{target} was filled by another process while this build ran")
            shutil.rmtree(work)
            return existing
        if target.exists():
            shutil.rmtree(target)
        os.rename(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest


def _build_into(work: Path, params: BuildParams, progress: bool) -> dict[str, Any]:
    started = time.monotonic()
    (work / INDEX_SUBDIR).mkdir()
    site = work / SITE_SUBDIR
    index = tantivy.Index(build_schema(), path=str(work / INDEX_SUBDIR))
    writer = index.writer(heap_size=128_000_000, num_threads=1)
    counts: Counter[str] = Counter()
    topics: set[str] = set()
    pages = 0
    bar = tqdm(total=params.limit or None, unit="doc", desc="indexing", disable=not progress)
    with bar:
        for page in _interleave(_sources(params), params.limit):
            if page.html is not None:
                path = site / page.site_path
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(page.html)
                pages += 1
            for doc in page.docs:
                writer.add_document(
                    tantivy.Document(
                        url=doc.url, title=doc.title, body=doc.body, date=doc.date, source=doc.source
                    )
                )
                counts[doc.source] += 1
                topics.add(_topic(doc.title))
            bar.update(len(page.docs))
    writer.commit()
    writer.wait_merging_threads()
    manifest = {
        "format": FORMAT_VERSION,
        "documents": sum(counts.values()),
        "pages": pages,
        "sources": dict(counts),
        "hosts": sorted(p.name for p in site.iterdir()) if site.exists() else [],
        "build": dataclasses.asdict(params),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_s": round(time.monotonic() - started, 2),
    }
    (work / TOPICS).write_text("".join(f"{topic}\n" for topic in sorted(topics) if topic))
    (work / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _topic(title: str) -> str:
    """What a title names: "asyncio.gather — Coroutines and Tasks — ..." -> "asyncio.gather",
    "rmdir(1) — remove empty directories" -> "rmdir"."""
    head = title.split(" \u2014 ", 1)[0]
    return re.sub(r"\([0-9][a-z0-9]*\)$", "", head).strip()


def load_topics(index_dir: str | Path) -> list[str]:
    """The topics of an index built by build_index; [] for an index without them."""
    try:
        return (Path(index_dir) / TOPICS).read_text().splitlines()
    except FileNotFoundError:
        return []

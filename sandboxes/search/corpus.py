"""Real documents available offline, cut into search documents and the pages that serve them.

- Python documentation (Debian's python3-doc HTML): one document per section (`<section id>`)
  and per API entry (`<dt id>` of a `dl.py`), each with the anchor in its URL, so a page yields
  many documents and the whole manual about 13,000.
- Debian manual pages, rendered to HTML by mandoc: one document per page.

Every document has a stable URL on a `.test` host (RFC 2606 reserves the name, so it can never be
a real site); the sandbox maps those hosts to its loopback server, so recorded URLs stay valid
when a trajectory is replayed in a fresh sandbox on another port.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import lxml.html

PYTHON_HOST = "docs.python.agentworld.test"
MAN_HOST = "manpages.agentworld.test"
CORPUS_HOSTS = (PYTHON_HOST, MAN_HOST)
MANDOC_TIMEOUT_S = 20.0
# Some packages ship thousands of generated pages (gcloud has 16,000 `gcloud_*` pages); keep a few
# of each family, so the corpus reads like a whole system's manual.
MAN_PAGES_PER_FAMILY = 25
FIRST_PASS_DOCS = 3

_SKIP_DIRS = {"_sources", "_static", "_images", "_downloads"}
_SKIP_PAGES = re.compile(r"^(genindex.*|search|py-modindex|contents|bugs|copyright|license)\.html$")
_UPDATED = re.compile(r"Last updated on ([A-Z][a-z]+ \d{1,2}, \d{4})")
_VERSION = re.compile(r"python(\d+\.\d+)")
_HEADING = "./*[self::h1 or self::h2 or self::h3 or self::h4 or self::h5 or self::h6][1]"
_MAN_FILE = re.compile(r"^(?P<name>.+)\.(?P<section>[1-9][a-z0-9]*)(\.gz)?$")


@dataclass
class Doc:
    url: str
    title: str
    body: str
    date: str = ""
    source: str = ""


@dataclass
class Page:
    """One served file (its path under the site root) and the documents cut from it."""

    site_path: str
    html: bytes | None  # None: served by an earlier Page with the same site_path
    docs: list[Doc] = field(default_factory=list)


def _clean(text: str) -> str:
    return " ".join(text.replace("\u00b6", " ").split())


def _iso_date(text: str, formats: tuple[str, ...]) -> str:
    for form in formats:
        try:
            return datetime.strptime(text.strip(), form).date().isoformat()
        except ValueError:
            continue
    return ""  # a footer such as "libXt 1.2.1" is no date


def _shuffled(paths: list[Path], seed: int) -> list[Path]:
    """A fixed spread over the source, so `--limit` samples every part of it, not its first pages."""
    ordered = sorted(paths)
    random.Random(seed).shuffle(ordered)
    return ordered


def python_doc_pages(root: str | Path, seed: int = 0) -> Iterator[Page]:
    """Pages of a Sphinx-built Python manual (python3-doc) with their section and API documents.

    Two passes, so that a `--limit` covers the whole manual rather than a few pages in depth:
    first every page with its leading FIRST_PASS_DOCS documents (the page's own section first),
    then the rest of each page's documents (those Pages carry no HTML: it is already written).
    """
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(
            f"no Python documentation at {base}; install it with `apt-get install python3-doc`"
        )
    match = _VERSION.search(str(base))
    version = match.group(1) if match else "docs"
    paths = [
        p
        for p in base.rglob("*.html")
        if not _SKIP_DIRS.intersection(p.relative_to(base).parts) and not _SKIP_PAGES.match(p.name)
    ]
    rest: list[Page] = []
    for path in _shuffled(paths, seed):
        relative = path.relative_to(base).as_posix()
        html = path.read_bytes()
        docs = _python_docs(html, f"http://{PYTHON_HOST}/{version}/{relative}")
        if docs:
            site_path = f"{PYTHON_HOST}/{version}/{relative}"
            yield Page(site_path, html, docs[:FIRST_PASS_DOCS])
            if len(docs) > FIRST_PASS_DOCS:
                rest.append(Page(site_path, None, docs[FIRST_PASS_DOCS:]))
    yield from rest


def _python_docs(html: bytes, url: str) -> list[Doc]:
    tree = lxml.html.fromstring(html)
    page_title = _clean(tree.findtext(".//title") or "")
    short = page_title.split(" \u2014 ")[0]
    updated = _UPDATED.search(_clean(tree.text_content()[-2000:]))
    date = _iso_date(updated.group(1), ("%B %d, %Y",)) if updated else ""
    docs: list[Doc] = []
    for section in tree.xpath("//section[@id]"):
        heading = section.xpath(_HEADING)
        name = _clean(heading[0].text_content()) if heading else short
        own = [section.text or ""]
        own += [child.text_content() for child in section if child.tag != "section"]
        body = _clean(" ".join(own))
        if body:
            title = page_title if page_title.startswith(name) else f"{name} \u2014 {page_title}"
            docs.append(Doc(f"{url}#{section.get('id')}", title, body, date, "python-docs"))
    for entry in tree.xpath("//dl[contains(concat(' ', @class, ' '), ' py ')]/dt[@id]"):
        described = entry.getnext()
        while described is not None and described.tag == "dt":
            described = described.getnext()
        signature = _clean(entry.text_content()).removesuffix("[source]").strip()
        text = described.text_content() if described is not None and described.tag == "dd" else ""
        body = _clean(f"{signature} {text}")
        docs.append(
            Doc(
                f"{url}#{entry.get('id')}",
                f"{entry.get('id')} \u2014 {page_title}",
                body,
                date,
                "python-docs",
            )
        )
    return docs


def man_page_files(root: str | Path) -> list[Path]:
    """English manual pages under `root` (man1..man8): links to one file counted once, and at most
    MAN_PAGES_PER_FAMILY pages whose names share the part before the first `_`."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"no manual pages at {base}; install them with `apt-get install manpages`")
    seen: set[str] = set()
    families: Counter[str] = Counter()
    found: list[Path] = []
    for directory in sorted(str(d) for d in base.glob("man[1-8]")):
        with os.scandir(directory) as entries:
            listed = sorted(((e.name, e) for e in entries), key=lambda item: item[0])
        for name, entry in listed:
            family = name.split("_", 1)[0]
            if families[family] >= MAN_PAGES_PER_FAMILY or not _MAN_FILE.match(name):
                continue
            # Only links need resolving (alternatives, .so-style aliases): most entries are files.
            real = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
            if real in seen or not os.path.isfile(real):
                continue
            seen.add(real)
            families[family] += 1
            found.append(Path(entry.path))
    return found


def man_pages(root: str | Path, seed: int = 0) -> Iterator[Page]:
    """Manual pages rendered to HTML with mandoc; a page mandoc cannot render is skipped."""
    if shutil.which("mandoc") is None:
        raise FileNotFoundError("mandoc is needed to render manual pages: `apt-get install mandoc`")
    base = Path(root)
    for path in _shuffled(man_page_files(base), seed):
        parts = _MAN_FILE.match(path.name)
        assert parts is not None
        name, section = parts.group("name"), parts.group("section")
        try:
            # cwd is the manual root: `.so` includes in pages are relative to it.
            rendered = subprocess.run(
                ["mandoc", "-Thtml", str(path)], cwd=base, capture_output=True, timeout=MANDOC_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            continue
        site_path = f"{MAN_HOST}/{path.parent.name}/{name}.{section}.html"
        doc = _man_doc(rendered.stdout, f"http://{site_path}", name, section)
        if doc is not None:
            yield Page(site_path, rendered.stdout, [doc])


def _man_doc(html: bytes, url: str, name: str, section: str) -> Doc | None:
    if not html.strip():
        return None
    tree = lxml.html.fromstring(html)
    text = tree.xpath("//div[@class='manual-text']")
    body = _clean(text[0].text_content()) if text else ""
    if not body:
        return None
    summary = tree.xpath("//section[h1[@id='NAME']]/p")
    purpose = _clean(summary[0].text_content()) if summary else ""
    purpose = purpose.split(" - ", 1)[1] if " - " in purpose else purpose
    title = f"{name}({section})" + (f" \u2014 {purpose}" if purpose else "")
    footer = tree.findtext(".//td[@class='foot-date']") or ""
    date = (
        _iso_date(footer, ("%B %d, %Y", "%B %Y", "%Y-%m-%d", "%d %B %Y", "%m/%d/%Y", "%Y")) if footer else ""
    )
    return Doc(url, title, body, date, "man-pages")

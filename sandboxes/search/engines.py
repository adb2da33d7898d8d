"""What every search backend returns, and the embedded tantivy engine.

An engine answers (query, num_results, page) with one page of hits and, where it knows it, the
total number of matching documents. Agent queries are free text: a query that tantivy's query
language rejects (an unmatched quote, `foo:bar` on an unknown field, a bare `AND`) is searched
again as its plain words, as a web search box would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import tantivy

INDEX_SUBDIR = "index"
# The snippet generator tokenises all the text it is given, and a manual page can hold 400 kB:
# it gets a window around the first place a query word (its first letters, so inflections match)
# occurs. Tantivy still picks and cuts the best fragment inside the window.
SNIPPET_WINDOW = 4000
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass
class SearchHit:
    url: str
    title: str
    snippet: str = ""
    date: str = ""


@dataclass
class SearchPage:
    hits: list[SearchHit] = field(default_factory=list)
    total: int | None = None  # matching documents in all, when the engine says
    note: str = ""  # how the query was interpreted, when not as written


class SearchEngine(Protocol):
    def search(self, query: str, num_results: int, page: int) -> SearchPage: ...

    def close(self) -> None: ...


def build_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("url", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("body", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("date", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("source", stored=True, tokenizer_name="raw", index_option="basic")
    return builder.build()


def plain_words(query: str) -> str:
    """The query as lower-case words only: no operators, fields, quotes or brackets remain."""
    return " ".join(word.lower() for word in _WORD.findall(query))


class TantivyEngine:
    """Searches an index directory written by `sandboxes.search.build`."""

    def __init__(self, index_dir: str | Path, snippet_chars: int = 240) -> None:
        path = Path(index_dir) / INDEX_SUBDIR
        if not path.is_dir() or not tantivy.Index.exists(str(path)):
            raise FileNotFoundError(
                f"no search index at {path}; build one with `python -m sandboxes.search build-index --out "
                f"{index_dir}`"
            )
        self.index = tantivy.Index.open(str(path))
        self.searcher = self.index.searcher()
        self.schema = self.index.schema
        self.snippet_chars = snippet_chars

    @property
    def num_docs(self) -> int:
        return self.searcher.num_docs

    def parse(self, query: str) -> tuple[tantivy.Query | None, str]:
        """(query, note): the query as written if it parses, else its plain words (None: no words)."""
        try:
            return self._parse(query), ""
        except ValueError:
            words = plain_words(query)
            if not words:
                return None, "the query has no searchable words"
            try:
                return self._parse(words), f"searched for the words: {words}"
            except ValueError:  # e.g. a word the parser still treats as syntax
                parsed, _errors = self.index.parse_query_lenient(words, ["title", "body"])
                return parsed, f"searched for the words: {words}"

    def _parse(self, text: str) -> tantivy.Query:
        return self.index.parse_query(text, ["title", "body"], field_boosts={"title": 2.0})

    def search(self, query: str, num_results: int, page: int) -> SearchPage:
        parsed, note = self.parse(query)
        if parsed is None:
            return SearchPage([], 0, note)
        offset = (page - 1) * num_results
        result = self.searcher.search(parsed, limit=num_results, offset=offset, count=True)
        generator = tantivy.SnippetGenerator.create(self.searcher, parsed, self.schema, "body")
        generator.set_max_num_chars(self.snippet_chars)
        terms = [word[:5] for word in plain_words(query).split() if len(word) > 2]
        hits = [self._hit(address, generator, terms) for _score, address in result.hits]
        return SearchPage(hits, result.count, note)

    def _hit(
        self, address: tantivy.DocAddress, generator: tantivy.SnippetGenerator, terms: list[str]
    ) -> SearchHit:
        doc = self.searcher.doc(address)
        body = doc.get_first("body") or ""
        window = tantivy.Document(body=_window(body, terms))
        snippet = generator.snippet_from_doc(window).fragment().strip()
        if not snippet:  # the words matched only the title: show the page's opening instead
            snippet = _opening(body, self.snippet_chars)
        return SearchHit(
            url=doc.get_first("url") or "",
            title=doc.get_first("title") or "",
            snippet=" ".join(snippet.split()),
            date=doc.get_first("date") or "",
        )

    def close(self) -> None:
        """Nothing to release: tantivy closes its files when the objects go."""


def _opening(body: str, limit: int) -> str:
    if len(body) <= limit:
        return body
    cut = body[:limit].rsplit(" ", 1)[0]
    return cut + " ..."


def _window(body: str, terms: list[str]) -> str:
    if len(body) <= SNIPPET_WINDOW:
        return body
    lowered = body.lower()
    found = [at for at in (lowered.find(term) for term in terms) if at >= 0]
    start = max(0, min(found) - SNIPPET_WINDOW // 4) if found else 0
    return body[start : start + SNIPPET_WINDOW]

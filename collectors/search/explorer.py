"""The embedded default search policy: information-seeking sessions without a model.

An episode starts from the task's own queries, then reads what comes back: it opens some results
(top ranks more often), refines the query with words from result titles, asks for the next page
or a different result count, searches for identifiers it saw on a page it read, tries a topic of
the corpus, uses the engine's query syntax now and then, and sometimes opens a URL that does not
exist, as agents do when they guess. All randomness comes from the rng given at reset, so a seed
and the same observations give the same session.
"""

from __future__ import annotations

import random
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

from collectors.policies.explorer import NOT_A_KNOB, Explorer
from sandboxes.search.actions import extract_action, search_action
from schemas.records import Action, Observation, Task

_WORD = re.compile(r"[A-Za-z][\w.\-]+")
_IDENTIFIER = re.compile(r"\b[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+\b|(?<!\w)--[a-z][a-z0-9-]{2,}")
_STOP = frozenset(
    "the and for with that this from are was were you your can will not but all any use used using "
    "into than then they them their there which what when where who how also may more most such "
    "each other its has have had been being one two see new version python documentation page "
    "find out does about whether".split()
)
MODIFIERS = ("example", "usage", "options", "how to", "tutorial", "returns", "error", "default", "vs")
MADE_UP_PAGES = ("overview.html", "faq.html", "getting-started.html", "advanced.html", "index2.html")


@dataclass
class _Session:
    rng: random.Random
    queries: list[str]
    steps: int = 0
    last_text: str = ""
    query: str = ""
    page: int = 1
    num_results: int = 10
    total: int | None = None
    results: list[dict] = field(default_factory=list)
    read: set[str] = field(default_factory=set)
    seen_urls: list[str] = field(default_factory=list)
    title_words: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)


def _words(text: str) -> list[str]:
    found = (w.strip(".-") for w in _WORD.findall(text))
    return [w for w in found if 2 < len(w) <= 40 and w.lower() not in _STOP]


def seed_queries(task: Task) -> list[str]:
    """The task's own queries (metadata "queries"), else the instruction's content words."""
    queries = [q for q in task.metadata.get("queries", []) if isinstance(q, str) and q.strip()]
    if queries:
        return queries
    words = _words(task.instruction)[:5]
    return [" ".join(words)] if words else ["documentation"]


@dataclass(eq=False)
class SearchExplorer(Explorer):
    name = "explorer"
    topics: list[str] = field(default_factory=list, metadata=NOT_A_KNOB)  # recorded as their count
    stop_probability: float = 0.08
    min_steps: int = 3
    session: _Session | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.topics = list(self.topics or [])  # a copy: the caller's list (or None) stays its own

    def config(self) -> dict:
        return {"topics": len(self.topics), **super().config()}

    def reset(self, task: Task, observation: Observation, rng: random.Random) -> None:
        self.session = _Session(rng=rng, queries=seed_queries(task))

    def act(self, observation: Observation) -> Action | None:
        s = self.started(self.session)
        self._observe(observation)
        s.steps += 1
        if s.steps == 1:
            return self._search(s.queries.pop(0))
        if s.steps > self.min_steps and s.rng.random() < self.stop_probability:
            return None
        moves = [(w, move) for w, move, ready in self._moves(s) if ready]
        for _ in range(3):  # an agent rarely sends the very same call twice in a row
            action = s.rng.choices([m for _, m in moves], weights=[w for w, _ in moves])[0]()
            if action.text != s.last_text:
                break
        s.last_text = action.text
        return action

    def _moves(self, s: _Session) -> list[tuple[float, Callable[[], Action], bool]]:
        # One page holds many section results: prefer pages not read yet.
        unread = [r for r in s.results if urllib.parse.urldefrag(r["url"]).url not in s.read]
        more = s.total is not None and s.total > s.page * s.num_results and len(s.results) == s.num_results
        return [
            (35, lambda: self._read(unread), bool(unread)),
            (10, lambda: self._search(s.query, page=s.page + 1, num_results=s.num_results), more),
            (18, self._refine, bool(s.query and s.title_words)),
            (18, lambda: self._search(s.queries.pop(0)), bool(s.queries)),
            (6, self._topic, bool(self.topics)),
            (10, lambda: self._search(s.rng.choice(s.identifiers)), bool(s.identifiers)),
            (4, lambda: self._search(s.query, num_results=s.rng.choice((5, 20))), bool(s.query)),
            (3, self._syntax, bool(s.query)),
            (3, self._missing_page, bool(s.seen_urls)),
            (2, lambda: self._search(s.rng.choice(s.title_words or ["documentation"])), True),
        ]

    def _search(self, query: str, page: int = 1, num_results: int = 10) -> Action:
        s = self.session
        assert s is not None
        s.query, s.page, s.num_results = query, page, num_results
        return search_action(
            query, num_results=num_results if num_results != 10 else None, page=page if page > 1 else None
        )

    def _read(self, unread: list[dict]) -> Action:
        s = self.session
        assert s is not None
        # Agents open the top results far more often than the tenth.
        chosen = s.rng.choices(unread, weights=[1.0 / (i + 1) for i in range(len(unread))])[0]
        s.read.add(urllib.parse.urldefrag(chosen["url"]).url)
        return extract_action(chosen["url"])

    def _refine(self) -> Action:
        s = self.session
        assert s is not None
        words = s.query.split()
        if len(words) > 2 and s.rng.random() < 0.3:
            words.pop(s.rng.randrange(len(words)))  # too narrow: drop a word
        else:
            extra = s.rng.choice(s.title_words)
            if extra.lower() not in s.query.lower():
                words.append(extra)
        return self._search(" ".join(words))

    def _topic(self) -> Action:
        s = self.session
        assert s is not None
        topic = s.rng.choice(self.topics)
        if s.rng.random() < 0.4:
            topic = f"{topic} {s.rng.choice(MODIFIERS)}"
        return self._search(topic)

    def _syntax(self) -> Action:
        s = self.session
        assert s is not None
        words = s.query.split()
        forms = [f'"{s.query}"', f"title:{words[0]}", f"{words[0]} AND {words[-1]}", f"{s.query} -{words[0]}"]
        return self._search(s.rng.choice(forms))

    def _missing_page(self) -> Action:
        s = self.session
        assert s is not None
        parts = urllib.parse.urlsplit(s.rng.choice(s.seen_urls))
        directory = parts.path.rsplit("/", 1)[0]
        guess = f"{directory}/{s.rng.choice(MADE_UP_PAGES)}"
        return extract_action(urllib.parse.urlunsplit((parts.scheme, parts.netloc, guess, "", "")))

    def _observe(self, observation: Observation) -> None:
        s = self.session
        assert s is not None
        data = observation.data or {}
        if observation.format == "search_results" and isinstance(data.get("results"), list):
            s.results = [r for r in data["results"] if isinstance(r, dict) and r.get("url")]
            s.total = data.get("total") if isinstance(data.get("total"), int) else None
            s.seen_urls = (s.seen_urls + [r["url"] for r in s.results])[-50:]
            titles = " ".join(str(r.get("title", "")).split(" \u2014 ")[0] for r in s.results)
            s.title_words = sorted(set(_words(titles)))[:60] or s.title_words
        elif observation.format == "markdown" and data.get("status") == 200:
            body = observation.text.partition("\n\n")[2]  # after the Title/URL head
            found = sorted(set(_IDENTIFIER.findall(body[:6000])))
            if found:
                s.identifiers = found[:40]

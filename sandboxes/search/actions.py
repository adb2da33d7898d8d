"""Search actions as data, named and shaped as in AgentWorldBench's search domain.

    web_search     {"query": str, "num_results"?: int (1..50, default 10), "page"?: int (1-based)}
    web_extractor  {"url": str (http or https)}
    answer         {"text": str}: the agent's final answer; it ends the episode

`parse_action` validates and fills the canonical `text` a world model is shown, e.g.
`web_search(query='asyncio gather', page=2)`, `web_extractor(url='http://...')` or
`answer(text='python -m venv')`.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from sandboxes.base import InvalidActionError
from schemas.records import Action

WEB_SEARCH = "web_search"
WEB_EXTRACTOR = "web_extractor"
ANSWER = "answer"
ACTION_KINDS = (WEB_SEARCH, WEB_EXTRACTOR, ANSWER)
DEFAULT_NUM_RESULTS = 10
MAX_NUM_RESULTS = 50
MAX_PAGE = 100
MAX_QUERY_CHARS = 1000
MAX_URL_CHARS = 4000
MAX_ANSWER_CHARS = 4000

ACTION_SPACE = """\
You use a web search engine through two tools, then give your answer. Each turn, reply with exactly
one JSON object:

{"action": "web_search", "query": "<words to search for>"}
    Optional: "num_results" (1-50, default 10) and "page" (1-based, default 1).
    Returns numbered results: [n] url, then title, snippet and date where known.
{"action": "web_extractor", "url": "<http(s) url from a result>"}
    Returns the page's main text as Markdown, or the error the fetch met (e.g. 404 Not Found).
{"action": "answer", "text": "<your final answer, short>"}
    Records your final answer to the task and ends the episode.

Examples:
{"action": "web_search", "query": "asyncio gather return_exceptions"}
{"action": "web_search", "query": "asyncio gather return_exceptions", "page": 2}
{"action": "web_extractor", "url": "http://docs.python.agentworld.test/3.11/library/asyncio-task.html"}
{"action": "answer", "text": "asyncio.gather(..., return_exceptions=True)"}
"""


# The reply an LLM agent writes (the generic `{"action": <kind>, ...arguments}` form).
def _written(kind: str, required: str, **properties: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of one action as the agent writes it: `{"action": kind, ...arguments}`."""
    return {
        "type": "object",
        "properties": {"action": {"const": kind}, **properties},
        "required": ["action", required],
        "additionalProperties": False,
    }


ACTION_SCHEMA: dict[str, Any] = {
    "oneOf": [
        _written(
            WEB_SEARCH,
            "query",
            query={"type": "string", "maxLength": MAX_QUERY_CHARS},
            num_results={"type": "integer", "minimum": 1, "maximum": MAX_NUM_RESULTS},
            page={"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
        ),
        _written(WEB_EXTRACTOR, "url", url={"type": "string", "minLength": 1, "maxLength": MAX_URL_CHARS}),
        _written(ANSWER, "text", text={"type": "string", "minLength": 1, "maxLength": MAX_ANSWER_CHARS}),
    ]
}


def _only(arguments: dict[str, Any], kind: str, *names: str) -> None:
    """InvalidActionError naming any argument the action does not take."""
    extra = set(arguments) - set(names)
    if extra:
        raise InvalidActionError(f"{kind}: unknown argument(s) {sorted(extra)}")


def _integer(arguments: dict[str, Any], name: str, default: int, upper: int) -> int:
    value = arguments.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidActionError(f"web_search: {name} must be an integer, got {value!r}")
    if not 1 <= value <= upper:
        raise InvalidActionError(f"web_search: {name} must be between 1 and {upper}, got {value}")
    return value


def _search(arguments: dict[str, Any]) -> Action:
    _only(arguments, "web_search", "query", "num_results", "page")
    query = arguments.get("query")
    if not isinstance(query, str):
        raise InvalidActionError(f"web_search needs a 'query' string, got {query!r}")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidActionError(f"web_search: query is longer than {MAX_QUERY_CHARS} characters")
    num_results = _integer(arguments, "num_results", DEFAULT_NUM_RESULTS, MAX_NUM_RESULTS)
    page = _integer(arguments, "page", 1, MAX_PAGE)
    clean: dict[str, Any] = {"query": query}
    shown = [f"query={query!r}"]
    if num_results != DEFAULT_NUM_RESULTS:
        clean["num_results"] = num_results
        shown.append(f"num_results={num_results}")
    if page != 1:
        clean["page"] = page
        shown.append(f"page={page}")
    return Action(kind=WEB_SEARCH, arguments=clean, text=f"web_search({', '.join(shown)})")


def _extractor(arguments: dict[str, Any]) -> Action:
    _only(arguments, "web_extractor", "url")
    url = arguments.get("url")
    if not isinstance(url, str) or not url.strip():
        raise InvalidActionError(f"web_extractor needs a 'url' string, got {url!r}")
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise InvalidActionError(f"web_extractor: url is longer than {MAX_URL_CHARS} characters")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidActionError(f"web_extractor: url must be an absolute http(s) URL, got {url!r}")
    return Action(kind=WEB_EXTRACTOR, arguments={"url": url}, text=f"web_extractor(url={url!r})")


def _answer(arguments: dict[str, Any]) -> Action:
    _only(arguments, "answer", "text")
    text = arguments.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InvalidActionError(f"answer needs a non-empty 'text' string, got {text!r}")
    if len(text) > MAX_ANSWER_CHARS:
        raise InvalidActionError(f"answer: text is longer than {MAX_ANSWER_CHARS} characters")
    return Action(kind=ANSWER, arguments={"text": text}, text=f"answer(text={text!r})")


def parse_action(kind: str, arguments: dict[str, Any]) -> Action:
    """Validate a search action's shape; raise InvalidActionError with the reason if malformed."""
    if not isinstance(arguments, dict):
        raise InvalidActionError(f"search action arguments must be an object, got {type(arguments).__name__}")
    if kind == WEB_SEARCH:
        return _search(arguments)
    if kind == WEB_EXTRACTOR:
        return _extractor(arguments)
    if kind == ANSWER:
        return _answer(arguments)
    raise InvalidActionError(f"unknown search action kind {kind!r}; expected one of {list(ACTION_KINDS)}")


def search_action(query: str, num_results: int | None = None, page: int | None = None) -> Action:
    arguments: dict[str, Any] = {"query": query}
    if num_results is not None:
        arguments["num_results"] = num_results
    if page is not None:
        arguments["page"] = page
    return parse_action(WEB_SEARCH, arguments)


def extract_action(url: str) -> Action:
    return parse_action(WEB_EXTRACTOR, {"url": url})

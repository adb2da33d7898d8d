"""The search sandbox on a real tantivy index, its pages fetched over real loopback HTTP."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxes.base import InvalidActionError, SandboxClosedError, SandboxCrashedError
from sandboxes.checks import check_sandbox
from sandboxes.domains import domain_spec
from sandboxes.search import (
    BuildParams,
    HttpLimits,
    SearchConfig,
    SearchSandbox,
    TantivyBackend,
    build_index,
    extract_action,
    parse_action,
    search_action,
)
from sandboxes.search.corpus import CORPUS_HOSTS
from schemas.records import Action, Task

ROOT = Path(__file__).resolve().parents[3]
COMMON = "file"  # a word hundreds of the test corpus's documents contain


def test_results_are_numbered_with_url_title_snippet_and_date(sandbox: SearchSandbox) -> None:
    observation = sandbox.step(search_action(COMMON)).observation
    assert observation.format == "search_results"
    header = observation.text.splitlines()[0]
    match = re.fullmatch(r'Results 1-10 of about ([\d,]+) for "file"', header)
    assert match, header
    total = int(match.group(1).replace(",", ""))
    assert total == observation.data["total"] and total > 20
    results = observation.data["results"]
    assert [r["rank"] for r in results] == list(range(1, 11))
    for result in results:
        assert result["url"].split("/")[2] in CORPUS_HOSTS
        assert result["title"] and result["snippet"]
        assert f"[{result['rank']}] {result['url']}\nTitle: {result['title']}\n" in observation.text
    assert any(r["date"] for r in results) and "\nDate: " in observation.text
    # Snippets are cut around the words searched for.
    assert sum(COMMON in r["snippet"].lower() for r in results) >= 5


def test_page_two_continues_the_ranking(sandbox: SearchSandbox) -> None:
    first = sandbox.step(search_action(COMMON)).observation.data["results"]
    second = sandbox.step(search_action(COMMON, page=2)).observation
    both = sandbox.step(search_action(COMMON, num_results=20)).observation.data["results"]
    assert second.text.startswith("Results 11-20 of about ")
    assert [r["rank"] for r in second.data["results"]] == list(range(11, 21))
    assert [r["url"] for r in first + second.data["results"]] == [r["url"] for r in both]
    assert second.data["page"] == 2


def test_a_page_past_the_last_result_says_so(sandbox: SearchSandbox) -> None:
    observation = sandbox.step(search_action(COMMON, num_results=50, page=100)).observation
    assert observation.data["results"] == []
    assert observation.text.startswith('No results on page 100 for "file" (about ')


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_an_empty_query_is_answered_not_crashed(sandbox: SearchSandbox, query: str) -> None:
    observation = sandbox.step(search_action(query)).observation
    assert observation.text == "Error: the search query is empty; give one or more words to search for."
    assert observation.data["error"] == "empty query" and observation.data["results"] == []


@pytest.mark.parametrize(
    "query",
    ['"unmatched quote file', "file:descriptor", "(file", "file AND", "AND", "OR NOT", "title:", "[file TO",
     "file^", "file~2 )", "{}", "a:b:c"],
)  # fmt: skip
def test_query_syntax_characters_fall_back_to_words(sandbox: SearchSandbox, query: str) -> None:
    observation = sandbox.step(search_action(query)).observation
    assert observation.format == "search_results"
    assert observation.text.startswith(("Results ", "No results"))
    words = re.findall(r"\w+", query)
    if "file" in words:
        assert observation.data["results"], f"{query!r} found nothing"


def test_a_query_without_words_finds_nothing_and_says_why(sandbox: SearchSandbox) -> None:
    observation = sandbox.step(search_action("(:")).observation
    assert observation.text == 'No results for "(:".\n(the query has no searchable words)'
    assert observation.data["note"] == "the query has no searchable words"


def test_valid_query_syntax_is_honoured(sandbox: SearchSandbox) -> None:
    """A field query is the engine's own language: only titles match."""
    observation = sandbox.step(search_action("title:directory")).observation
    titles = [r["title"].lower() for r in observation.data["results"]]
    assert titles and all("director" in t for t in titles)
    assert "note" not in observation.data


def test_extractor_returns_a_result_page_as_markdown(sandbox: SearchSandbox) -> None:
    results = sandbox.step(search_action("manual page")).observation.data["results"]
    url = next(r["url"] for r in results if "manpages" in r["url"])
    observation = sandbox.step(extract_action(url)).observation
    assert observation.format == "markdown"
    assert observation.data["status"] == 200 and observation.data["content_type"] == "text/html"
    head, _, body = observation.text.partition("\n\n")
    assert head == f"Title: {observation.data['title']}\nURL: {url}"
    assert len(body) > 200 and "<" not in body[:200]
    assert "**" in body or "#" in body  # Markdown emphasis or headings from the real HTML


def test_extractor_bounds_a_long_page(index_dir: Path) -> None:
    config = SearchConfig(backend=TantivyBackend(index_dir=str(index_dir)), max_page_chars=500)
    with SearchSandbox(config) as box:
        box.reset(Task(id="long"))
        url = box.step(search_action(COMMON)).observation.data["results"][0]["url"]
        observation = box.step(extract_action(url)).observation
    assert observation.data["truncated_chars"] > 0
    assert observation.text.endswith(f"[... {observation.data['truncated_chars']} more characters not shown]")


def test_extractor_on_a_missing_page_shows_the_404(sandbox: SearchSandbox) -> None:
    url = "http://manpages.agentworld.test/man1/no-such-command.1.html"
    observation = sandbox.step(extract_action(url)).observation
    assert observation.text == f"Error: 404 Not Found for {url}"
    assert observation.data == {"url": url, "error": f"404 Not Found for {url}", "status": 404}


def test_extractor_refuses_hosts_outside_the_sandbox(sandbox: SearchSandbox) -> None:
    observation = sandbox.step(extract_action("http://example.com/")).observation
    assert observation.text == (
        "Error: could not fetch http://example.com/: host example.com is not reachable from this sandbox"
    )


def test_extractor_on_an_unreachable_allowed_host(index_dir: Path) -> None:
    config = SearchConfig(
        backend=TantivyBackend(index_dir=str(index_dir)),
        fetch_hosts=("127.0.0.1",),
        fetch=HttpLimits(retries=1, backoff_s=0.05),
    )
    with SearchSandbox(config) as box:
        box.reset(Task(id="down"))
        observation = box.step(extract_action("http://127.0.0.1:1/page")).observation
    assert observation.text.startswith("Error: could not fetch http://127.0.0.1:1/page: ")
    assert "Connection" in observation.text or "refused" in observation.text


@pytest.mark.parametrize(
    ("kind", "arguments", "reason"),
    [
        ("web_search", {}, "needs a 'query' string"),
        ("web_search", {"query": 3}, "needs a 'query' string"),
        ("web_search", {"query": "x", "page": 0}, "page must be between 1 and 100"),
        ("web_search", {"query": "x", "num_results": 51}, "num_results must be between 1 and 50"),
        ("web_search", {"query": "x", "num_results": True}, "num_results must be an integer"),
        ("web_search", {"query": "x", "lang": "en"}, "unknown argument(s) ['lang']"),
        ("web_extractor", {"url": "file:///etc/passwd"}, "absolute http(s) URL"),
        ("web_extractor", {"url": ""}, "needs a 'url' string"),
        ("browse", {"url": "http://x.test/"}, "unknown search action kind 'browse'"),
    ],
)
def test_malformed_actions_are_rejected(
    sandbox: SearchSandbox, kind: str, arguments: dict, reason: str
) -> None:
    with pytest.raises(InvalidActionError, match=re.escape(reason)):
        parse_action(kind, arguments)
    with pytest.raises(InvalidActionError, match=re.escape(reason)):
        sandbox.step(Action(kind=kind, arguments=arguments))


def test_action_text_is_the_call_the_agent_made() -> None:
    assert search_action("asyncio gather", page=2).text == "web_search(query='asyncio gather', page=2)"
    assert search_action("x", num_results=10).arguments == {"query": "x"}
    assert extract_action(" http://a.test/p ").text == "web_extractor(url='http://a.test/p')"


def test_passes_check_sandbox(index_dir: Path) -> None:
    box = SearchSandbox(SearchConfig(backend=TantivyBackend(index_dir=str(index_dir))))
    actions = [
        search_action(COMMON),
        search_action(COMMON, page=2),
        extract_action("http://manpages.agentworld.test/x"),
    ]
    check_sandbox(box, Task(id="check"), actions)
    with pytest.raises(SandboxClosedError):
        box.start()


def test_replay_sandbox_gets_the_same_results_on_another_port(sandbox: SearchSandbox) -> None:
    """URLs are recorded on the corpus hosts, so a fresh sandbox on a new port serves them too."""
    first = sandbox.step(search_action("directory")).observation
    page = sandbox.step(extract_action(first.data["results"][0]["url"])).observation
    with domain_spec("search").replay_sandbox(sandbox.describe()) as again:
        again.reset(Task(id="replay"))
        assert again.step(search_action("directory")).observation == first
        assert again.step(extract_action(first.data["results"][0]["url"])).observation == page


def test_replay_rebuilds_a_missing_index_from_its_recorded_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = BuildParams(man_pages="", limit=80, seed=3)
    build_index(tmp_path / "gone", params, progress=False)
    with SearchSandbox(SearchConfig(backend=TantivyBackend(index_dir=str(tmp_path / "gone")))) as box:
        box.reset(Task(id="a"))
        environment = box.describe()
        expected = box.step(search_action("return value")).observation
    assert environment.config["backend"]["build"]["limit"] == 80
    shutil.rmtree(tmp_path / "gone")
    monkeypatch.setenv("AGENTWORLD_CACHE_DIR", str(tmp_path / "cache"))
    with domain_spec("search").replay_sandbox(environment) as again:
        again.reset(Task(id="b"))
        assert again.step(search_action("return value")).observation == expected


def test_build_index_cli(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "sandboxes.search", *args]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)

    assert "examples:" in cli("build-index", "--help").stdout
    out = tmp_path / "idx"
    built = cli("build-index", "--out", str(out), "--limit", "40", "--man-pages", "", "--no-progress")
    assert built.returncode == 0, built.stderr
    assert re.search(r"indexed 40 documents \(40 python-docs\) from \d+ pages in [\d.]+s", built.stdout)
    again = cli("build-index", "--out", str(out), "--limit", "40", "--no-progress")
    assert again.returncode == 2 and "pass --force" in again.stderr
    queried = cli("query", "--index", str(out), "the")
    assert queried.returncode == 0 and queried.stdout.startswith("Results 1-10 of about ")
    missing = cli("query", "--index", str(tmp_path / "nothing"), "the")
    assert missing.returncode == 2 and "build-index" in missing.stderr


def test_a_dead_page_server_is_a_crash_not_an_observation(index_dir: Path) -> None:
    box = SearchSandbox(SearchConfig(backend=TantivyBackend(index_dir=str(index_dir))))
    with box:
        box.reset(Task(id="crash"))
        box._server.close()  # type: ignore[union-attr]  # the server thread dies under the sandbox
        assert not box.alive
        with pytest.raises(SandboxCrashedError, match="page server stopped"):
            box.step(search_action(COMMON))

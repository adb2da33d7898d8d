"""Domain metrics, verifiers and parsers on web trees and search result lists in the sandboxes' forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from training.fidelity.domain_metrics import search_scores, web_scores
from training.fidelity.metrics import aggregate, score_against, score_turn
from training.fidelity.overlap import multiset_f1
from training.fidelity.report import build_report, domain_tables
from training.fidelity.report_html import write_all
from training.observations.parsers import observation_data, parse_results, parse_web, without_bids
from training.observations.template import Template
from training.rewards.verifiers import format_valid

PAGE = """URL: http://shop.agentworld.test/cart
Title: Cart - Shop
Tabs: [0] Cart - Shop (active) | [1] http://docs.agentworld.test/
Focused: [13]

RootWebArea 'Cart - Shop', focused
\t[12] link 'Cart (2)', url='/cart'
\t[13] textbox 'Email', required, value='alice@example.com'
\t\tStaticText 'alice@example.com'
\t[14] button 'Check out'"""

RESULTS = """Results 1-3 of about 1,234 for "asyncio gather"

[1] http://docs.python.agentworld.test/3.11/library/asyncio-task.html
Title: Coroutines and Tasks
Snippet: Run awaitable objects concurrently.
Date: 2026-10-07

[2] http://docs.python.agentworld.test/3.11/library/asyncio.html
Title: asyncio

[3] http://docs.python.agentworld.test/3.11/whatsnew/3.11.html
Title: What's New"""


def test_web_page_header_and_elements_are_read_back() -> None:
    page = parse_web(PAGE)
    assert (page.url, page.title, page.focused_bid, page.error) == (
        "http://shop.agentworld.test/cart",
        "Cart - Shop",
        "13",
        "",
    )
    assert page.tabs == [
        {"index": 0, "title": "Cart - Shop", "active": True},
        {"index": 1, "title": "http://docs.agentworld.test/", "active": False},
    ]
    data = observation_data("web", PAGE)
    assert [e["bid"] for e in data["elements"]] == ["12", "13", "14"]
    assert data["elements"][1] == {"bid": "13", "role": "textbox", "name": "Email"}
    failed = parse_web(PAGE.replace("Focused: [13]", "Focused: none\nError: element with bid '99' not found"))
    assert failed.focused_bid == "" and failed.error == "element with bid '99' not found"
    assert without_bids("\t[12] link 'Cart (2)'") == "\tlink 'Cart (2)'"


def test_web_tree_f1_with_and_without_bids_and_url_title_match() -> None:
    assert web_scores(PAGE, PAGE) == {
        "tree_f1": 1.0,
        "tree_f1_no_bids": 1.0,
        "url_match": 1.0,
        "title_match": 1.0,
    }
    # The same page with every bid renumbered: the nodes agree, their ids do not.
    renumbered = PAGE.replace("[12]", "[22]").replace("[13]", "[23]").replace("[14]", "[24]")
    scores = web_scores(renumbered, PAGE)
    assert scores["tree_f1_no_bids"] == 1.0 and scores["tree_f1"] == pytest.approx(2 * 0.4 * 0.4 / 0.8)
    # Another page: url and title differ, one node line of five kept.
    other = "URL: http://shop.agentworld.test/\nTitle: Shop\n\nRootWebArea 'Shop'\n\t[14] button 'Check out'"
    scores = web_scores(other, PAGE)
    assert (scores["url_match"], scores["title_match"]) == (0.0, 0.0)
    assert scores["tree_f1"] == pytest.approx(2 * (1 / 2) * (1 / 5) / (1 / 2 + 1 / 5))
    # A runner's error observation has no page: url/title do not apply.
    assert web_scores("anything", "policy error: no JSON object")["url_match"] is None


def test_web_verifier_wants_the_header_and_a_well_nested_tree() -> None:
    assert format_valid("web", PAGE, PAGE)
    assert not format_valid("web", PAGE.split("\n\n", 1)[1], PAGE)  # the header is missing
    assert not format_valid("web", PAGE.replace("\t\tStaticText", "\t\t\tStaticText"), PAGE)  # skips a level
    assert not format_valid("web", PAGE.replace("\t[14] button", "\t??? what"), PAGE)
    truncated = PAGE + "\n[... 40 more nodes truncated: the tree is limited to 2000 lines]"
    assert format_valid("web", truncated, PAGE)


def test_search_results_are_parsed_with_their_fields() -> None:
    results = parse_results(RESULTS)
    assert [r.rank for r in results] == [1, 2, 3]
    assert results[0].as_dict() == {
        "rank": 1,
        "url": "http://docs.python.agentworld.test/3.11/library/asyncio-task.html",
        "title": "Coroutines and Tasks",
        "snippet": "Run awaitable objects concurrently.",
        "date": "2026-10-07",
    }
    page = "Title: asyncio\nURL: http://docs.python.agentworld.test/3.11/library/asyncio.html\n\n# asyncio"
    assert parse_results(page) == []
    assert observation_data("search", page) == {
        "title": "asyncio",
        "url": "http://docs.python.agentworld.test/3.11/library/asyncio.html",
    }


def test_search_result_overlap_and_rank_agreement() -> None:
    assert search_scores(RESULTS, RESULTS)["result_f1"] == 1.0
    # The first two swapped and the third replaced by an invented URL.
    blocks = RESULTS.split("\n\n")
    invented = "[3] http://docs.python.agentworld.test/invented.html\nTitle: Nothing"
    swapped = "\n\n".join(
        [blocks[0], blocks[2].replace("[2]", "[1]"), blocks[1].replace("[1]", "[2]"), invented]
    )
    scores = search_scores(swapped, RESULTS)
    assert scores["result_precision"] == scores["result_recall"] == pytest.approx(2 / 3)
    assert scores["overlap_at_5"] == pytest.approx(2 / 3) and scores["rank_agreement"] == 0.0
    assert scores["page_line_f1"] is None
    # Prose instead of results: nothing overlaps.
    assert search_scores("I found some pages.", RESULTS)["result_f1"] == 0.0


def test_search_page_turns_score_line_f1_only() -> None:
    page = "Title: asyncio\nURL: http://x/a\n\n# asyncio\n\nAsynchronous I/O."
    scores = search_scores(page.replace("Asynchronous I/O.", "Something else."), page)
    assert scores["result_f1"] is None and scores["page_line_f1"] == pytest.approx(0.75)
    assert multiset_f1([], []) == 1.0 and multiset_f1(["a"], []) == 0.0


def test_search_verifier_wants_consecutive_ranks_with_urls() -> None:
    assert format_valid("search", RESULTS, RESULTS)
    assert format_valid(
        "search", RESULTS.replace("[1]", "[11]").replace("[2]", "[12]").replace("[3]", "[13]"), RESULTS
    )
    assert not format_valid("search", RESULTS.replace("[2]", "[5]"), RESULTS)
    assert not format_valid("search", RESULTS.replace("[1] http://", "[1] ftp://"), RESULTS)
    assert not format_valid("search", "none", RESULTS)
    assert format_valid("search", "Error: 404 Not Found", "Error: 404 Not Found for http://x/y")


def test_domain_metrics_reach_rows_aggregates_and_report_tables(tmp_path: Path) -> None:
    web = score_against("web", PAGE, [Template.stable(PAGE)])
    search = score_turn("search", RESULTS, Template.stable(RESULTS)).as_dict()
    assert web["tree_f1"] == 1.0 and "domain_metrics" not in web and search["result_f1"] == 1.0
    rows = [
        {**web, "domain": "web", "turn_idx": 1, "prediction": PAGE},
        {**search, "domain": "search", "turn_idx": 1, "prediction": RESULTS},
        {
            **score_turn("terminal", "$", Template.stable("$")).as_dict(),
            "domain": "terminal",
            "turn_idx": 1,
            "prediction": "$",
        },
    ]
    summary = aggregate(rows)
    assert summary["by_domain"]["web"]["tree_f1"] == 1.0 and "tree_f1" not in summary["by_domain"]["terminal"]
    assert summary["by_domain"]["search"]["page_line_f1"] is None
    report = build_report({"model/teacher_forced": rows}, {"real": "x"}, {"skipped": "no replays"})
    tables = {domain: header for domain, header, _ in domain_tables(report)}
    assert "tree_f1_no_bids" in tables["web"] and "overlap_at_5" in tables["search"]
    assert "tree_f1" not in tables["terminal"] and "tree_f1" not in tables["overall"]
    paths = write_all(report, tmp_path, [])
    assert "tree_f1_no_bids" in paths["html"].read_text() and "rank_agreement" in paths["md"].read_text()

"""Edit scripts (schemas/edit_script.py): exact round trips over real captured observations of every
domain, the edge cases, and broken scripts."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from schemas.domains import RECORDS
from schemas.edit_script import HEADER, TARGET_FORMS, EditScriptError, apply, diff, target_form
from schemas.storage import read_trajectories

ROOT = Path(__file__).resolve().parents[1]
TRANSITIONS = ROOT / "schemas" / "fixtures" / "real_transitions.json"
OBSERVATIONS = ROOT / "training" / "fixtures" / "real_observations.json"
TERMINAL_RUN = ROOT / "beam_pipelines" / "fixtures" / "terminal_run"


def _real_pairs() -> list[tuple[str, str, str]]:
    """(domain, previous, current) for every consecutive pair of recorded real observations."""
    pairs = []
    for record in json.loads(TRANSITIONS.read_text()):
        texts = record["observations"]
        pairs += [(record["domain"], a, b) for a, b in zip(texts, texts[1:], strict=False)]
    for t in read_trajectories(str(TERMINAL_RUN)):
        texts = [t.initial_observation.text, *(s.observation.text for s in t.steps)]
        pairs += [(t.domain, a, b) for a, b in zip(texts, texts[1:], strict=False)]
    singles: dict[tuple[str, str], dict[int, str]] = {}
    for o in json.loads(OBSERVATIONS.read_text()):
        singles.setdefault((o["domain"], o["trajectory_id"]), {})[o["turn_idx"]] = o["text"]
    for (domain, _), turns in singles.items():
        pairs += [(domain, turns[k - 1], turns[k]) for k in turns if k - 1 in turns]
    return pairs


REAL = _real_pairs()
DOMAINS = ("terminal", "web", "os", "android", "mcp", "search", "swe")


def test_the_fixtures_hold_consecutive_pairs_of_every_domain():
    for domain in DOMAINS:
        assert sum(d == domain for d, _, _ in REAL) >= 9, domain


@pytest.mark.parametrize("domain", DOMAINS)
def test_real_pairs_round_trip_exactly(domain):
    pairs = [(a, b) for d, a, b in REAL if d == domain]
    forms = []
    for prev, cur in pairs:
        target = diff(prev, cur, domain)
        assert apply(prev, target, domain) == cur
        assert len(target) <= len(cur) or target_form(cur) == "delta"
        forms.append(target_form(target))
    if domain in ("terminal", "web", "os", "android"):
        # most steps change a small part of a screen or tree: the script is the usual target there
        assert forms.count("delta") > len(forms) / 2, forms


@pytest.mark.parametrize(("domain", "bound"), [("terminal", 0.5), ("os", 0.3), ("android", 0.3)])
def test_targets_are_short_where_steps_change_little(domain, bound):
    # the targets on median target length; web is not bound here: most of the recorded web
    # steps load another page, which is the whole observation either way
    pairs = [(a, b) for d, a, b in REAL if d == domain]
    full = statistics.median(len(b) for _, b in pairs)
    target = statistics.median(len(diff(a, b, domain)) for a, b in pairs)
    assert target <= bound * full


def test_every_real_observation_rebuilds_after_any_other():
    # an unrelated previous observation (a new page, a new tool result): still exact
    texts = [(d, b) for d, _, b in REAL[::7]]
    for domain, cur in texts:
        for _, prev in texts[:12]:
            assert apply(prev, diff(prev, cur, domain), domain) == cur


def _tree(rows: list[str]) -> str:
    """An os-style tree: nodes numbered in order, two spaces of indent per depth."""
    return "\n".join(f"{'  ' * (row != 'frame')}[{i}] {row} @(0,0 9x9)" for i, row in enumerate(rows))


def test_an_inserted_node_renumbers_the_nodes_after_it():
    rows = ["frame", *(f'label "{i}"' for i in range(20))]
    prev, cur = _tree(rows), _tree([*rows[:3], 'label "new"', *rows[3:]])
    target = diff(prev, cur, "os")
    # one inserted line: the nodes after it keep their lines although every number changed
    assert target.split("\n")[:2] == [HEADER, "@@ insert after [2] @@"]
    assert len(target.split("\n")) == 3
    assert apply(prev, target, "os") == cur


def test_the_domain_records_say_which_observations_are_keyed_and_renumbered_by_node_id():
    assert {r.name for r in RECORDS if r.node_ids} == {"web", "os", "android"}
    assert {r.name for r in RECORDS if r.renumbered_ids} == {"os", "android"}
    rows = ["frame", *(f'label "{i}"' for i in range(20))]
    prev, cur = _tree(rows), _tree([*rows[:3], 'label "new"', *rows[3:]])
    # android renumbers as os does, and the os record's alias finds it; web keys by id but keeps the
    # numbers it is given, so every node after the insertion is a changed line there
    assert diff(prev, cur, "android") == diff(prev, cur, "desktop") == diff(prev, cur, "os")
    assert diff(prev, cur, "web") != diff(prev, cur, "os")
    assert apply(prev, diff(prev, cur, "web"), "web") == cur
    # a domain with no node ids, or a name of no domain, keys by line number
    single = _tree([*rows[:3], 'label "changed"', *rows[4:]])
    for domain in ("terminal", "robotics"):
        assert diff(prev, single, domain) == f'{HEADER}\n@@ replace 4 @@\n  [3] label "changed" @(0,0 9x9)'
    assert diff(prev, single, "os") == f'{HEADER}\n@@ replace [3] @@\n  [3] label "changed" @(0,0 9x9)'


def test_web_keys_are_bids_and_offsets():
    prev = "\n".join(
        ["URL: http://a.test/", "", "RootWebArea 'A'", "\t[3] main"]
        + ["\t\tStaticText 'x'", "\t\tStaticText 'y'", "\t[9] button 'Go'"]
    )
    cur = prev.replace("StaticText 'y'", "StaticText 'z'")
    target = diff(prev, cur, "web")
    assert target == f"{HEADER}\n@@ replace [3]+2 @@\n\t\tStaticText 'z'"
    assert apply(prev, target, "web") == cur


def test_unchanged_is_the_header_alone_and_short_texts_stay_full():
    screen = "user@host:~$ ls\nfile.txt\nuser@host:~$ "
    assert diff(screen, screen, "terminal") == HEADER
    assert apply(screen, HEADER, "terminal") == screen
    assert diff("$ ", "$ ", "terminal") == "$ "  # shorter than the header itself


@pytest.mark.parametrize(
    ("prev", "cur"),
    [
        ("", ""),  # empty screen
        ("", "a\nb"),
        ("a\nb", ""),
        ("line\n" * 40, "line\n" * 40 + "more"),  # trailing newline kept apart from the new line
        ("line\n" * 40, ("line\n" * 40).rstrip("\n")),  # trailing newline lost
        ("line\r\n" * 30, "line\r\n" * 29 + "other\r\n"),  # carriage returns stay in their lines
        ("prompt ✓ naïve 日本語\n" * 20, "prompt ✓ naïve 日本語\n" * 19 + "żółć 🙂"),  # unicode
        ("\n".join(f"row {i}" for i in range(50)), "a whole new page\nwith other text"),
    ],
)
def test_edge_cases_round_trip(prev, cur):
    for domain in DOMAINS:
        assert apply(prev, diff(prev, cur, domain), domain) == cur


def test_a_moved_node_round_trips_in_every_tree_domain():
    nodes = [f"\t[{i}] link 'item {i}', url='/p/{i}'" for i in range(40)]
    moved = nodes[:5] + nodes[6:30] + [nodes[5]] + nodes[30:]
    prev, cur = "RootWebArea 'x'\n" + "\n".join(nodes), "RootWebArea 'x'\n" + "\n".join(moved)
    target = diff(prev, cur, "web")
    assert target_form(target) == "delta"
    assert apply(prev, target, "web") == cur


def test_an_observation_that_looks_like_a_script_is_still_exact():
    cur = f"{HEADER}\nprinted by a program\n" + "x\n" * 30
    prev = "x\n" * 30
    target = diff(prev, cur, "terminal")
    assert target_form(target) == "delta" and target != cur
    assert apply(prev, target, "terminal") == cur


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (f"{HEADER}\nstray line", "follows no replace or insert"),
        (f"{HEADER}\n@@ replace 9 @@\nx", "outside the previous observation"),
        (f"{HEADER}\n@@ replace 3..2 @@\nx", "runs backwards"),
        (f"{HEADER}\n@@ delete 2 @@\n@@ delete 1 @@", "out of order"),
        (f"{HEADER}\n@@ insert after 1 @@", "has no new lines"),
        (f"{HEADER}\n@@ delete 1 @@\nx", "follows no replace or insert"),
        (f"{HEADER}\n@@ replace [7] @@\nx", r"no single node \[7\]"),
    ],
)
def test_a_broken_script_raises(script, message):
    with pytest.raises(EditScriptError, match=message):
        apply("a\nb\nc", script, "web")


def test_target_forms():
    assert TARGET_FORMS == ("full", "delta")
    assert target_form("plain") == "full" and target_form(f"{HEADER}\n@@ delete 1 @@") == "delta"

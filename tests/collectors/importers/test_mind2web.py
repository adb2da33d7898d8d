"""Mind2Web tasks through the real CLI: a JSON file holding a list of tasks, laid out as the raw
release stores them (https://huggingface.co/datasets/osunlp/Mind2Web, `data/train/train_*.json`),
read by `datasets`, rendered into our web tree, validated and written; a task with unparseable HTML
to the dead-letter file; a rerun resumes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from collectors.importers.__main__ import main
from collectors.importers.html_tree import render_page
from schemas import read_trajectories

ROOT = Path(__file__).resolve().parents[3]


def _page(title: str, body: str) -> str:
    """A page as Mind2Web's raw_html has it: a DOMSnapshot serialized by lxml, text nodes as <text>
    elements, Chromium's backend_node_id and the layout box on every node."""
    return (
        '<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.0 Transitional//EN" "http://www.w3.org/TR/REC-html40/loose.dtd">\n'
        f'<html backend_node_id="1" bounding_box_rect="0,0,1280,1000"><head backend_node_id="2" '
        f'bounding_box_rect="-1,-1,-1,-1"><title backend_node_id="3" bounding_box_rect="-1,-1,-1,-1">'
        f'<text backend_node_id="4" bounding_box_rect="-1,-1,-1,-1">{title}</text></title></head>'
        f'<body backend_node_id="5" bounding_box_rect="0,0,1280,1000">{body}</body></html>'
    )


def _box(rect: str) -> str:
    return f'bounding_box_rect="{rect}"'


NO_BOX = _box("-1,-1,-1,-1")
HOME = _page(
    "Car Rental | United",
    f'<div backend_node_id="10" {_box("0,0,1280,80")}>'
    f'<ul backend_node_id="11" {_box("0,0,600,40")}>'
    f'<li backend_node_id="12" {_box("0,0,100,40")} is_clickable="true">'
    f'<h2 backend_node_id="13" {_box("0,0,100,40")}>'
    f'<text backend_node_id="14" {_box("0,0,50,20")}>CAR</text></h2></li>'
    f'<li backend_node_id="15" {_box("100,0,100,40")}>'
    f'<a backend_node_id="16" href="/flights" {_box("100,0,100,40")}>'
    f'<text backend_node_id="17" {_box("100,0,60,20")}>Flights</text></a></li></ul></div>'
    f'<div backend_node_id="20" {NO_BOX}><text backend_node_id="21" {NO_BOX}>Hidden menu</text></div>',
)
FORM = _page(
    "Car Rental | United",
    f'<form backend_node_id="30" {_box("0,100,800,300")}>'
    '<input backend_node_id="31" type="text" aria_label="Enter pick up city, airport name, or airport code." '
    f'placeholder="Pick-up location" {_box("0,100,400,40")}/>'
    f'<select backend_node_id="32" aria_label="Driver age" {_box("0,150,200,40")}>'
    '<option backend_node_id="33" option_selected="true"><text backend_node_id="34">25+</text></option>'
    '<option backend_node_id="35"><text backend_node_id="36">18-24</text></option></select>'
    f'<button backend_node_id="37" {_box("0,200,120,40")}><svg backend_node_id="38" {_box("0,200,20,20")}>'
    f'<path backend_node_id="39" {_box("0,200,20,20")}/></svg>'
    f'<text backend_node_id="40" {_box("20,200,80,20")}>Find cars</text></button></form>',
)
FILLED = FORM.replace(
    'placeholder="Pick-up location"', 'placeholder="Pick-up location" input_value="Brooklyn Central"'
)


def _candidate(tag: str, bid: str) -> dict:
    attributes = {"backend_node_id": bid, "bounding_box_rect": "0,0,10,10"}
    return {
        "tag": tag,
        "attributes": json.dumps(attributes),
        "is_original_target": True,
        "is_top_level_target": True,
        "backend_node_id": bid,
    }


def _action(
    uid: str, html: str, op: str, value: str, target: tuple[str, str] | None, original: str = ""
) -> dict:
    return {
        "action_uid": uid,
        "raw_html": html,
        "cleaned_html": html,
        "operation": {"op": op, "original_op": original or op, "value": value},
        "pos_candidates": [_candidate(*target)] if target else [],
        "neg_candidates": [_candidate("div", "10")],
    }


def _task(annotation_id: str, actions: list[dict], reprs: list[str]) -> dict:
    return {
        "annotation_id": annotation_id,
        "website": "united",
        "domain": "Travel",
        "subdomain": "Airlines",
        "confirmed_task": "rent a car in Brooklyn - Central, NY on from April 9 to April 15.",
        "action_reprs": reprs,
        "actions": actions,
    }


def write_sample(directory: Path) -> Path:
    """Three Mind2Web tasks in one raw-release JSON file: two good ones, one whose HTML is empty."""
    good = _task(
        "401c4e6f-6b0b-47b4-8157-92d7ca468bbc",
        [
            _action("a1", HOME, "CLICK", "", ("li", "12")),
            _action("a2", FORM, "TYPE", "Brooklyn Central", ("input", "31")),
            _action("a3", FILLED, "SELECT", "18-24", ("select", "32")),
            _action("a4", FILLED, "CLICK", "", ("path", "39")),
        ],
        [
            "[heading]  CAR -> CLICK",
            "[combobox]  Enter pick up city, airport name, or airport code. -> TYPE: Brooklyn Central",
            "[select]  Driver age -> SELECT: 18-24",
            "[button]  Find cars -> CLICK",
        ],
    )
    hover = _task(
        "b64c2417-c44e-46c4-bb0b-ff1775e7da29",
        [
            _action("b1", HOME, "CLICK", "", ("a", "16"), original="HOVER"),
            _action("b2", FORM, "CLICK", "", ("button", "37"), original="ENTER"),
            _action("b3", FORM, "CLICK", "", None),
        ],
        ["[link]  Flights -> HOVER", "[button]  Find cars -> ENTER", "[div]   -> CLICK"],
    )
    empty_page = _action("c1", "", "CLICK", "", ("li", "12"))
    broken = _task("c0ffee00-0000-4000-8000-000000000000", [empty_page, empty_page], [])
    folder = directory / "data" / "train"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "train_0.json"
    path.write_text(json.dumps([good, hover, broken]))
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "collectors.importers", "mind2web", "--no-progress", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


def _run_here(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The same CLI in this process (no second interpreter start): its summary text."""
    assert main(["mind2web", "--no-progress", *args]) == 0
    return capsys.readouterr().out


def test_tasks_import_as_web_trajectories_with_bids_and_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = write_sample(tmp_path), tmp_path / "out"
    result = _run("--input", str(source), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "imported 2 of 3 rows" in result.stdout, result.stdout
    found = {t.task.id: t for t in read_trajectories(out, validate=True)}
    assert set(found) == {"401c4e6f-6b0b-47b4-8157-92d7ca468bbc", "b64c2417-c44e-46c4-bb0b-ff1775e7da29"}

    car = found["401c4e6f-6b0b-47b4-8157-92d7ca468bbc"]
    assert car.domain == "web" and car.environment.config["website"] == "united"
    assert car.outcome.status == "truncated"  # the page after the last action is not in Mind2Web
    assert [s.action.text for s in car.steps] == [
        "click('12')",
        "fill('31', 'Brooklyn Central')",
        "select_option('32', '18-24')",
    ]
    assert car.task.metadata["final_action"]["action_uid"] == "a4"
    initial = car.initial_observation.text
    assert initial.startswith("Title: Car Rental | United\n\nRootWebArea 'Car Rental | United'")
    assert "[12] listitem, clickable" in initial and "[13] heading 'CAR', level=2" in initial
    assert "[16] link 'Flights', url='/flights'" in initial
    assert "Hidden menu" not in initial  # no layout box: not in the accessibility tree
    # The observation after action k is the page action k+1 was taken on.
    after_click = car.steps[0].observation.text
    city = "[31] textbox 'Enter pick up city, airport name, or airport code.'"
    assert f"{city}, placeholder='Pick-up location'" in after_click
    assert "[32] combobox 'Driver age', value='25+'" in after_click
    assert "[33] option '25+', selected" in after_click and "[35] option '18-24'" in after_click
    assert "value='Brooklyn Central'" in car.steps[1].observation.text
    assert car.steps[0].info["action_repr"] == "[heading]  CAR -> CLICK"
    source_row = car.provenance.source
    assert source_row.dataset == "osunlp/Mind2Web" and source_row.format == "mind2web"
    assert source_row.row_id == car.task.id and source_row.license == "CC-BY-4.0"
    assert source_row.uri.endswith("train_0.json")

    hover = found["b64c2417-c44e-46c4-bb0b-ff1775e7da29"]
    # HOVER and ENTER keep their own meaning; the third action has no target, so it ends the episode.
    assert [s.action.text for s in hover.steps] == ["hover('16')", "press('37', 'Enter')"]

    dead = (out / "dead_letter" / "import-mind2web.jsonl").read_text().splitlines()
    assert len(dead) == 1
    letter = json.loads(dead[0])
    assert letter["row_id"] == "c0ffee00-0000-4000-8000-000000000000"
    assert "raw_html" in letter["reason"] and "cleaned_html" in letter["reason"], letter["reason"]

    again = _run_here(capsys, "--input", str(source), "--out", str(out))
    assert "imported 0 of 3 rows" in again and "already imported by an earlier run (skipped): 2" in again
    assert len(list(read_trajectories(out))) == 2


def test_a_click_on_an_icon_lands_on_the_button_that_shows_it() -> None:
    page = render_page(FILLED, clickable_bids=["39"])
    assert page.shown_bid("39") == "37"  # the <path> has no line; its button does
    assert "[37] button 'Find cars'" in page.tree.text
    assert page.shown_bid("21") is None  # hidden, and no shown ancestor


def test_the_hubs_parquet_copy_imports_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The Hub's Parquet conversion: the same columns, `operation` and the candidates as structs."""
    tasks = json.loads(write_sample(tmp_path / "raw").read_text())[:2]
    path = tmp_path / "hub" / "train-00000-of-00001.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(tasks), path)
    summary = _run_here(capsys, "--input", str(path.parent), "--out", str(tmp_path / "out"))
    assert "imported 2 of 2 rows" in summary, summary
    found = {t.task.id: t for t in read_trajectories(tmp_path / "out", validate=True)}
    steps = found["401c4e6f-6b0b-47b4-8157-92d7ca468bbc"].steps
    assert [s.action.text for s in steps][1] == "fill('31', 'Brooklyn Central')"

"""Fidelity metrics (pure): templates with volatile spans, edit and line scores, format verifiers."""

from __future__ import annotations

import pytest

from training.fidelity.metrics import aggregate, line_prf, score_turn
from training.fidelity.noise_floor import volatile_template
from training.observations.shapes import shape_pattern
from training.observations.template import Span, Template
from training.rewards.judge import parse_judge_reply, to_percent
from training.rewards.verifiers import format_valid
from training.rewards.verifiers.terminal import looks_like_prompt

SCREEN = "agent@sandbox:~$ date\nMon Nov 30 09:51:07 UTC 2026\nagent@sandbox:~$"


def date_template() -> Template:
    return volatile_template(
        SCREEN, ["agent@sandbox:~$ date\nMon Nov 30 10:05:44 UTC 2026\nagent@sandbox:~$"]
    )


def test_volatile_template_marks_only_what_differs() -> None:
    template = date_template()
    assert template.text == SCREEN
    assert [s.text for s in template.volatile_spans] == ["09", "51", "07"]
    assert template.volatile_spans[0].variants == ["10"]


def test_same_runs_give_no_volatile_span() -> None:
    assert volatile_template("hi\n$", ["hi\n$", "hi\n$"]).volatile_spans == []


def test_insertion_in_another_run_is_a_volatile_span() -> None:
    template = volatile_template("a\n$", ["a\n[1]+ Done sleep\n$"])
    assert template.text == "a\n$"
    assert [(s.text, s.variants) for s in template.volatile_spans] == [("", ["[1]+ Done sleep\n"])]


def test_stable_content_exact_and_volatile_content_by_form() -> None:
    template = date_template()
    other_time = score_turn("terminal", SCREEN.replace("09:51:07", "23:59:00"), template)
    assert other_time.stable_exact and other_time.volatile_form == 1.0 and not other_time.exact
    bad_form = score_turn("terminal", SCREEN.replace("09:51:07", "ab:51:07"), template)
    assert bad_form.stable_exact and bad_form.volatile_form == pytest.approx(2 / 3)
    wrong_stable = score_turn("terminal", SCREEN.replace("Nov", "Dec"), template)
    assert not wrong_stable.stable_exact and wrong_stable.volatile_form is None


def test_multiline_volatile_span_matches_with_or_without_the_line() -> None:
    template = volatile_template("a\n$", ["a\n[1]+ Done sleep\n$"])
    assert score_turn("terminal", "a\n$", template).stable_exact
    assert score_turn("terminal", "a\n[1]+ Done sleep\n$", template).stable_exact
    assert not score_turn("terminal", "b\n$", template).stable_exact


def test_exact_prediction_scores_one_everywhere() -> None:
    score = score_turn("terminal", SCREEN, Template.stable(SCREEN))
    assert score.exact and score.stable_exact and score.format_valid
    assert score.edit_similarity == 1.0 and score.line_f1 == 1.0 and score.volatile_form is None


def test_empty_untagged_prediction_is_invalid_and_scores_zero() -> None:
    score = score_turn("terminal", "", Template.stable(SCREEN), tagged=False)
    assert not score.format_valid and not score.tagged and not score.stable_exact
    assert score.edit_similarity == 0.0


def test_format_validity_needs_the_tags_and_the_domain_shape() -> None:
    assert not score_turn("terminal", SCREEN, Template.stable(SCREEN), tagged=False).format_valid
    assert not score_turn("terminal", "no prompt", Template.stable(SCREEN), tagged=True).format_valid
    assert score_turn("terminal", SCREEN, Template.stable(SCREEN), tagged=True).format_valid


def test_a_volatile_span_holds_only_about_as_much_as_real_runs_put_there() -> None:
    # A background job's notice appeared in one real run: the span may hold a line like it, not a screen.
    template = volatile_template("a\n$", ["a\n[1]+ Done sleep\n$"])
    assert score_turn("terminal", "a\n[2]+ Done sleep 30\n$", template).stable_exact
    invented = "a\n" + "".join(f"file{i}.txt\n" for i in range(20)) + "$"
    assert not score_turn("terminal", invented, template).stable_exact
    # Within one line too: a volatile date field cannot swallow the rest of the line.
    one_line = date_template()
    assert not score_turn(
        "terminal", SCREEN.replace("07", "07 and a long invented tail"), one_line
    ).stable_exact


def test_shape_keeps_character_classes() -> None:
    assert shape_pattern("09:51") == r"\d+:\d+"
    assert shape_pattern("tmp.Ab3x") == r"[^\W\d_]+\.\w+"
    span = Span("4217", volatile=True, variants=["88"])
    assert span.form() == r"(?:\d+)"


def test_line_precision_recall() -> None:
    p, r, f1 = line_prf("a\nb\nx", "a\nb\nc\nd")
    assert (p, r) == (pytest.approx(2 / 3), 0.5) and f1 == pytest.approx(4 / 7)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("agent@sandbox:~/webapp$", True),
        ("root@box:/# ", True),
        ("$", True),
        ("(venv) user@h:~$ ", True),
        (">>>", False),
        ("total 8", False),
        ("hello $ world", False),
    ],
)
def test_prompt_lines(line: str, expected: bool) -> None:
    assert looks_like_prompt(line) is expected


def test_terminal_format_needs_a_prompt_only_where_the_real_screen_had_one() -> None:
    assert format_valid("terminal", "$ ls\nfile\n$", "$ ls\nfile2\n$")
    assert not format_valid("terminal", "$ ls\nfile", "$ ls\nfile2\n$")
    # The real screen shows `less` holding the terminal: no prompt is due.
    assert format_valid("terminal", "line 1\n:", "line 1\nline 2\n:")


def test_json_and_tree_verifiers() -> None:
    assert format_valid("mcp", '{"a": 1}', '{"b": 2}') and not format_valid("mcp", "{a: 1", '{"b": 2}')
    assert format_valid("mcp", "Error: no such tool", "Error: unknown tool x")
    assert format_valid("android", "<hierarchy><node/></hierarchy>", "<hierarchy/>")
    assert not format_valid("android", "<hierarchy><node></hierarchy>", "<hierarchy/>")
    assert not format_valid("android", "<root/>", "<hierarchy/>")
    # Space-indented trees (desktop accessibility); the web and search forms: test_domain_metrics.py.
    assert format_valid("os", "RootWebArea\n  button 'OK'\n    text", "RootWebArea")
    assert not format_valid("os", "RootWebArea\n      button 'OK'", "RootWebArea\n  link 'a'")


def test_aggregate_by_domain_and_turn() -> None:
    rows = [
        {"domain": "terminal", "turn_idx": 1, "edit_similarity": 1.0, "volatile_form": None},
        {"domain": "terminal", "turn_idx": 2, "edit_similarity": 0.5, "volatile_form": 1.0},
        {"domain": "mcp", "turn_idx": 1, "edit_similarity": 0.0, "volatile_form": None},
    ]
    agg = aggregate(rows)
    assert agg["overall"]["turns"] == 3 and agg["overall"]["edit_similarity"] == pytest.approx(0.5)
    assert agg["by_domain"]["terminal"]["edit_similarity"] == 0.75
    assert agg["by_turn"]["1"]["edit_similarity"] == 0.5 and agg["by_turn"]["2"]["volatile_form"] == 1.0
    assert agg["by_domain"]["mcp"]["volatile_form"] is None


def test_judge_reply_parsing() -> None:
    scores, error = parse_judge_reply(
        'Sure. {"format": 5, "factuality": "4", "consistency": 3, "realism": 4.0, "quality": 2} hope it helps'
    )
    assert error == "" and scores == {
        "format": 5,
        "factuality": 4,
        "consistency": 3,
        "realism": 4,
        "quality": 2,
    }
    scores, _ = parse_judge_reply("Format: 4\nFactuality: 3\nConsistency - 5\nRealism: 2\nQuality: 1")
    assert scores == {"format": 4, "factuality": 3, "consistency": 5, "realism": 2, "quality": 1}
    scores, error = parse_judge_reply('{"format": 7, "factuality": 3} the prediction looks fine')
    assert scores is None and "format" in error and "quality" in error
    assert to_percent(1) == 0 and to_percent(5) == 100 and to_percent(3) == 50

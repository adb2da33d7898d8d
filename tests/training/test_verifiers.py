"""Rule verifiers: every domain's verifier accepts what the real sandboxes print, wrapped in a
well-formed reply, and rejects each documented failure form under its own check name."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from schemas.domains import KNOWN_DOMAINS
from schemas.records import Observation
from schemas.render import CLOSE_TAG, OPEN_TAG, agentworldbench_record, target_text
from schemas.storage import read_trajectories
from tests.training.conftest import TERMINAL_RUN
from tests.training.test_noise_floor import real_runs
from training.fidelity import metrics
from training.fidelity.metrics import score_against
from training.fidelity.noise_floor import volatile_template
from training.observations.template import Template
from training.rewards.verifiers import CHECKS, format_valid, verify
from training.rewards.verifiers.__main__ import main as verifiers_cli

FIXTURE = Path(__file__).parent / "fixtures" / "real_observations.json"


def real_observations() -> list[tuple[str, str]]:
    """(domain, text) of every recorded real observation the tests hold (fixtures/README.md)."""
    found = [(o["domain"], o["text"]) for o in json.loads(FIXTURE.read_text(encoding="utf-8"))]
    for trajectory in read_trajectories(str(TERMINAL_RUN)):
        found += [(trajectory.domain, step.observation.text) for step in trajectory.steps]
    return found


REAL = real_observations()


def first(domain: str, where=lambda text: True) -> str:
    return next(text for d, text in REAL if d == domain and where(text))


def wrap(text: str, reasoning: str = "") -> str:
    return target_text(Observation("", text), reasoning)


def test_the_recordings_cover_every_domain() -> None:
    assert {d for d, _ in REAL} == set(KNOWN_DOMAINS), "a domain without real observations is untested"


@pytest.mark.parametrize("reasoning", ["", "The click opens the page; its tree follows."])
def test_every_real_observation_in_a_well_formed_reply_is_verified(reasoning: str) -> None:
    refused = {}
    for domain, text in REAL:
        verdict = verify(domain, wrap(text, reasoning), text)
        if not verdict.ok:
            refused[text[:80]] = [str(f) for f in verdict.failures]
    assert not refused, refused
    assert len(REAL) > 100


def test_whitespace_around_the_blocks_and_unwrapped_content_are_accepted() -> None:
    text = first("mcp")
    assert verify("mcp", f"\n  <think>short</think>\n{OPEN_TAG}{text}{CLOSE_TAG}\n\n", text).ok
    assert verify("mcp", f"{OPEN_TAG}\n{text}\n{CLOSE_TAG}", text).content == text


@dataclass
class Case:
    check: str
    domain: str
    reference: str
    reply: str


def _replace_once(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _cases() -> list[Case]:
    screen = first("terminal", lambda t: t.rstrip().endswith("$"))
    page = first("web", lambda t: "\t\t\t[" in t)
    desktop = first("os", lambda t: t.startswith("Focused:") and "\n  [" in t)
    phone = first("android", lambda t: t.startswith("Package:") and "\n  [" in t)
    result = first("mcp", lambda t: '"isError": false' in t)
    bash = first("swe", lambda t: t.endswith("]") and "[exit status: 0]" in t and t.count("\n") > 3)
    diff = first("swe", lambda t: t.startswith("--- "))
    listing = first("swe", lambda t: t.startswith("     1\t") and t.count("\n") > 4)
    results = first("search", lambda t: "\n[2] http" in t)
    body = wrap(screen)
    unnumbered = "\n".join(line.split("\t", 1)[-1] for line in listing.split("\n"))
    predicting = page.replace("RootWebArea '", "RootWebArea 'I predict ")
    return [
        Case("extraction.no_block", "terminal", screen, screen),
        Case("extraction.unclosed", "terminal", screen, f"{OPEN_TAG}\n{screen}"),
        Case("extraction.multiple_blocks", "terminal", screen, f"{body}\n{body}"),
        Case("extraction.text_outside", "terminal", screen, f"Here is the screen:\n{body}"),
        Case("extraction.text_outside", "terminal", screen, f"{body}\nHope this helps."),
        Case("extraction.think_after_block", "terminal", screen, f"{body}\n<think>done</think>"),
        Case("extraction.think_malformed", "terminal", screen, f"<think>a</think><think>b</think>{body}"),
        Case("extraction.think_malformed", "terminal", screen, f"<think>it prints\n{body}"),
        Case("format.empty", "terminal", screen, wrap("  ")),
        Case("terminal.prompt", "terminal", screen, wrap(screen.rstrip().rsplit("\n", 1)[0])),
        Case("mcp.json", "mcp", result, wrap(result.replace("{", "", 1))),
        Case("mcp.result_shape", "mcp", result, wrap(json.dumps({"content": "hi", "isError": False}))),
        Case("mcp.result_shape", "mcp", result, wrap('{"error": {"message": "no code"}}')),
        Case("swe.exit_status", "swe", bash, wrap(bash.rsplit("\n", 1)[0])),
        Case("swe.diff", "swe", diff, wrap("I replaced the line.")),
        Case("swe.listing", "swe", listing, wrap(unnumbered)),
        Case("web.header", "web", page, wrap(page.split("\n\n", 1)[1])),
        Case("web.tree", "web", page, wrap(page.split("\n\n", 1)[0])),
        Case("tree.nesting", "web", page, wrap(_replace_once(page, "\n\t\t\t[", "\n\t\t\t\t\t["))),
        Case("tree.node_lines", "web", page, wrap(page + "\nThe page shows a sign-in form.")),
        Case("tree.nesting", "os", desktop, wrap(_replace_once(desktop, "\n  [", "\n      ["))),
        Case("tree.node_lines", "os", desktop, wrap(desktop + "\nThe window is open.")),
        Case("os.focused_line", "os", desktop, wrap(desktop.split("\n", 1)[1])),
        Case("tree.nesting", "android", phone, wrap(_replace_once(phone, "\n  [", "\n      ["))),
        Case("android.package_line", "android", phone, wrap(phone.split("\n", 1)[1])),
        Case("tree.xml", "android", "<hierarchy/>", wrap("<hierarchy><node></hierarchy>")),
        Case("search.results", "search", results, wrap("No results.")),
        Case("search.ranks", "search", results, wrap(_replace_once(results, "\n[2] http", "\n[5] http"))),
        Case("search.urls", "search", results, wrap(_replace_once(results, "\n[1] http", "\n[1] ftp"))),
        Case("deterministic.lines", "terminal", screen, wrap(_changed_word(screen))),
        Case("deterministic.lines", "swe", diff, wrap(diff.replace("\n+", "\n+# ", 1))),
        Case("commentary.simulation", "terminal", screen, wrap(f"As a simulated environment:\n{screen}")),
        Case("commentary.simulation", "web", page, wrap(predicting)),
        Case("commentary.aside", "swe", listing, wrap(f"{listing}\n(note: the rest is unchanged)")),
        Case("commentary.aside", "search", results, wrap(results + "\n(output omitted for brevity)")),
        Case("commentary.self_evaluation", "mcp", "plain text", wrap("plain text\nScore: 5/5")),
        Case("commentary.self_evaluation", "swe", bash, wrap(f"I am confident this is right.\n{bash}")),
    ]


def _changed_word(screen: str) -> str:
    """The screen with one word of a digit-free line changed: deterministic content gone wrong."""
    line = next(line for line in screen.split("\n") if line.strip() and not any(c.isdigit() for c in line))
    word = next(w for w in line.split() if w.isalpha() or w.strip("$#:~/").isalpha())
    return screen.replace(line, line.replace(word, word[::-1] + "x", 1), 1)


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.check}-{c.domain}-{n}" for n, c in enumerate(CASES)])
def test_each_failure_form_is_refused_under_its_own_check(case: Case) -> None:
    verdict = verify(case.domain, case.reply, case.reference)
    assert not verdict.ok
    assert case.check in verdict.failed_checks, [str(f) for f in verdict.failures]
    assert all(f.check in CHECKS and f.reason for f in verdict.failures)


def test_every_documented_check_has_a_refusal_case() -> None:
    assert {c.check for c in CASES} | {"deterministic.stable_spans"} == set(CHECKS)


def test_commentary_words_that_the_real_observation_shows_are_content() -> None:
    source = "     1\t# (Note: I'm not sure this works on Windows.)\n     2\timport os"
    assert verify("swe", wrap(source), source).ok
    added = source + "\n     3\t(Note: I'm not sure this works on Windows.)"
    assert set(verify("swe", wrap(added), source).failed_checks) == {
        "commentary.aside",
        "commentary.self_evaluation",
    }


SCREEN = "agent@box:~$ date; mktemp\nWed Dec  2 07:52:13 UTC 2026\n/tmp/tmp.Qx81kAzu0P\nagent@box:~$"
OTHER_RUN = "agent@box:~$ date; mktemp\nWed Dec  2 07:52:14 UTC 2026\n/tmp/tmp.b7ZkLm02Qa\nagent@box:~$"


def test_a_noise_floor_template_frees_volatile_spans_and_holds_stable_ones() -> None:
    template = volatile_template(SCREEN, [OTHER_RUN])
    assert template.volatile_spans, "the runs differed in the clock and the temp name"
    later = SCREEN.replace("07:52:13", "07:52:59").replace("Qx81kAzu0P", "zzTOP1234x")
    assert verify("terminal", wrap(later), SCREEN, template).ok
    wrong = SCREEN.replace("/tmp/tmp.", "/var/tmp/tmp.")
    assert verify("terminal", wrap(wrong), SCREEN, template).failed_checks == ["deterministic.stable_spans"]
    # A volatile span may not hide invented output: it is bounded by the real values' length.
    padded = SCREEN.replace("Qx81kAzu0P", "Qx81kAzu0P" + "\nroot secrets" * 5)
    assert not verify("terminal", wrap(padded), SCREEN, template).ok


def test_without_a_noise_floor_digits_may_change_and_words_may_not() -> None:
    ticked = SCREEN.replace("07:52:13", "07:53:00").replace("Qx81kAzu0P", "Qx81kAzu1P")
    assert verify("terminal", wrap(ticked), SCREEN).ok
    assert verify("terminal", wrap(ticked), SCREEN, Template.stable(SCREEN)).ok, "an unmeasured template"
    renamed = SCREEN.replace("Wed Dec", "Thu Dec")
    assert verify("terminal", wrap(renamed), SCREEN).failed_checks == ["deterministic.lines"]


def test_a_reply_failing_several_checks_names_them_all() -> None:
    screen = first("terminal", lambda t: t.rstrip().endswith("$"))
    reply = f"Sure!\n{OPEN_TAG}\nThis is a simulation.\n{CLOSE_TAG}"
    failed = verify("terminal", reply, screen).failed_checks
    assert {"extraction.text_outside", "terminal.prompt", "commentary.simulation"} <= set(failed)
    assert verify("terminal", "no tags at all", screen).failed_checks == ["extraction.no_block"]


def test_fidelity_rows_carry_the_verdict_and_share_the_format_rule() -> None:
    assert metrics.format_valid is format_valid, "one definition of format-valid"
    text = first("web")
    good = score_against("web", text, [Template.stable(text)], True, wrap(text, "thinking"))
    assert good["verified"] is True and good["format_valid"] is True
    # The same content, read leniently by the public evaluator, but with chatter after the block.
    chatty = score_against("web", text, [Template.stable(text)], True, wrap(text) + "\nDone!")
    assert chatty["verified"] is False and chatty["format_valid"] is True
    baseline = score_against("web", text, [Template.stable(text)])  # no reply: the content, tagged
    assert baseline["verified"] is True
    assert score_against("web", text, [Template.stable(text)], tagged=False)["verified"] is False


@pytest.mark.bwrap
@pytest.mark.tmux
def test_real_runs_pass_the_templates_of_the_other_real_runs() -> None:
    # Random names only (no clock): whether a minute turns over between runs must not decide the test.
    recorded, *replays = real_runs("bwrap", ["mktemp", "echo $RANDOM"])
    for k in range(2):
        for j, replayed in enumerate(replays):
            template = volatile_template(recorded[k], [r[k] for n, r in enumerate(replays) if n != j])
            assert template.volatile_spans
            reply = wrap(replayed[k], "mktemp prints a new name.")
            verdict = verify("terminal", reply, recorded[k], template)
            assert verdict.ok, [str(f) for f in verdict.failures]
    template = volatile_template(recorded[0], [r[0] for r in replays])
    moved = recorded[0].replace("/tmp/tmp.", "/var/tmp/tmp.")
    refused = verify("terminal", wrap(moved), recorded[0], template)
    assert refused.failed_checks == ["deterministic.stable_spans"]


def test_cli_checks_a_predictions_file_per_domain(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trajectory = next(iter(read_trajectories(str(TERMINAL_RUN))))
    records = [agentworldbench_record(trajectory, k) for k in (1, 2, 3)]
    data = tmp_path / "terminal.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    screens = [s.observation.text for s in trajectory.steps]
    predictions = tmp_path / "preds.jsonl"
    rows = [{"id": records[0]["id"], "reply": wrap(screens[0])}]
    rows.append({"id": records[1]["id"], "reply": screens[1]})  # no tags
    predictions.write_text("".join(json.dumps(r) + "\n" for r in rows))  # the third id has no prediction
    out, summary = tmp_path / "verdicts.jsonl", tmp_path / "summary.json"
    argv = ["--data", str(data), "--predictions", str(predictions), "--out", str(out), "--json", str(summary)]
    assert verifiers_cli(argv) == 0
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["ok"] for v in verdicts] == [True, False, False]
    assert [f["check"] for f in verdicts[1]["failures"]] == ["extraction.no_block"]
    table = json.loads(summary.read_text())["terminal"]
    assert table["verified"] == pytest.approx(1 / 3) and table["failed_checks"] == {
        "extraction.no_block": 1,
        "missing": 1,
    }
    assert "33.3%" in capsys.readouterr().out
    assert verifiers_cli(["--data", str(tmp_path / "none.jsonl"), "--predictions", str(predictions)]) == 2

"""`python -m training.fidelity` comparing real models on REAL recorded trajectories: a "fine-tuned"
checkpoint whose base.json names its base, a second checkpoint under --compare, and the base itself,
beside repeat-previous; then the fallback to an untrained copy when a checkpoint records no base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.training.conftest import TERMINAL_RUN
from training.fidelity.__main__ import main
from training.models import build_model
from training.tokenizer import load_tokenizer

FAST = ["--limit-trajectories", "3", "--max-turns", "2", "--max-new-tokens", "24", "--context-chars", "2000"]
FAST += ["--replays", "0", "--no-closed-loop", "--no-progress", "--concurrency", "4"]


def checkpoint(path: Path, seed: int, base: Path | None = None) -> Path:
    """A tiny Qwen3 with its own random weights, saved like a training run's checkpoint."""
    build_model("qwen3-tiny", seed=seed).save_pretrained(path)
    load_tokenizer().save_pretrained(path)
    if base is not None:
        (path / "base.json").write_text(json.dumps({"base": "qwen3-tiny", "resolved": str(base)}))
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ckpts")
    base = checkpoint(root / "base", seed=0)
    return {
        "base": base,
        "sft": checkpoint(root / "sft", seed=1, base=base),
        "other": checkpoint(root / "other", seed=2, base=base),
    }


def test_two_models_and_their_base_side_by_side_with_intervals(
    checkpoints: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    argv = ["--real", str(TERMINAL_RUN), "--model", str(checkpoints["sft"]), "--out", str(out)]
    argv += ["--compare", f"other={checkpoints['other']}", *FAST]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    meta, comparison = report["meta"], report["comparison"]
    # --base auto found the base in the checkpoint's base.json; --compare named the second model
    assert meta["base"]["name"] == "base" and meta["base"]["spec"] == str(checkpoints["base"])
    assert meta["base"]["recorded_in"] == str(checkpoints["sft"] / "base.json")
    assert meta["compare"]["other"]["model"] == str(checkpoints["other"]) and not meta["failed_systems"]
    assert comparison["systems"] == ["model", "other", "base", "repeat_previous"]
    assert comparison["reference"] == "base" and comparison["baseline"] == "repeat_previous"
    assert comparison["bootstrap"] == {"resamples": 2000, "seed": 0, "level": 0.95, "cluster": "trajectory"}
    terminal = comparison["domains"]["terminal"]
    assert terminal["main_metric"] == "edit_similarity" and terminal["ceiling"] is None
    assert terminal["turns"] == 6 and terminal["trajectories"] == 3
    for name in comparison["systems"]:
        assert 0.0 <= terminal["values"][name] <= 1.0, name
        assert (
            terminal["values"][name]
            == report["systems"][f"{name}/teacher_forced"]["by_domain"]["terminal"]["edit_similarity"]
        )
        assert terminal["format_valid"][name] is not None, name
    # every pair, each model first, on the same 6 turns of 3 trajectories
    pairs = {(d["a"], d["b"]): d for d in terminal["differences"]}
    assert set(pairs) == {
        ("model", "other"),
        ("model", "base"),
        ("model", "repeat_previous"),
        ("other", "base"),
        ("other", "repeat_previous"),
        ("base", "repeat_previous"),
    }
    for d in pairs.values():
        assert d["turns"] == 6 and d["trajectories"] == 3
        assert d["ci_low"] <= d["difference"] <= d["ci_high"]
        assert d["excludes_zero"] == (d["ci_low"] > 0 or d["ci_high"] < 0)
        values = terminal["values"]
        assert d["difference"] == pytest.approx(values[d["a"]] - values[d["b"]])
    # Random weights write noise; the previous real screen is far closer to the next one.
    assert terminal["values"]["repeat_previous"] > max(
        terminal["values"][n] for n in ("model", "other", "base")
    )
    # Three models, three caches: no model was answered with another's replies.
    assert meta["requests"] == 3 * 6 and meta["cache_hits"] == 0
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 18

    html = (out / "report.html").read_text()
    comparison_svg = html[html.index('<svg xmlns="http://www.w3.org/2000/svg" class="comparison"') :]
    comparison_svg = comparison_svg[: comparison_svg.index("</svg>")]
    assert comparison_svg.count('class="difference"') == 3  # model, other, repeat_previous vs the base
    assert comparison_svg.count("<rect") == 4 and "minus base (95% CI)" in comparison_svg
    assert "model - base (95% CI)" in html and "<script" not in html
    md = (out / "report.md").read_text()
    assert "## Comparison" in md and "| other - repeat_previous (95% CI) |" in md
    assert "| domain | model format valid | other format valid |" in md
    assert "comparison, teacher-forced" in printed and "model - base (95% CI)" in printed
    assert "model vs base: better in" in printed and "- other vs repeat_previous: better in" in md
    assert printed.index("comparison, teacher-forced") > printed.index("share of the real-vs-real ceiling")

    # A rerun asks none of the three models anything.
    assert main(argv) == 0
    rerun = json.loads((out / "report.json").read_text())
    assert rerun["meta"]["requests"] == 0 and rerun["meta"]["cache_hits"] == 18
    assert rerun["comparison"] == comparison


def test_without_base_json_the_base_is_an_untrained_copy_and_errors_are_clear(
    checkpoints: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    argv = ["--real", str(TERMINAL_RUN), "--model", str(checkpoints["base"]), "--out", str(out), *FAST]
    argv += ["--compare", f"missing={tmp_path / 'no-such-checkpoint'}"]
    assert main(argv) == 1  # a model that cannot be opened is left out, the rest is reported
    report = json.loads((out / "report.json").read_text())
    assert report["comparison"]["systems"] == ["model", "untrained", "repeat_previous"]
    assert report["meta"]["base"]["weights"] == "random-init"
    assert "missing" in report["meta"]["failed_systems"]
    assert any(n.startswith("missing is missing from the comparison") for n in report["notes"])
    assert "missing: cannot open" in capsys.readouterr().err
    # the untrained copy has the checkpoint's architecture, not its weights: its own cache entries
    assert report["meta"]["requests"] == 2 * 6

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{}")
    (tmp_path / "bad" / "base.json").write_text("not json")
    bad = ["--real", str(TERMINAL_RUN), "--model", str(tmp_path / "bad"), "--out", str(tmp_path / "o"), *FAST]
    assert main(bad) == 2
    assert "base.json is unreadable" in capsys.readouterr().err
    for wrong in ("=x", "model=x", "other"):
        with pytest.raises(SystemExit):
            main(
                [
                    "--real",
                    str(TERMINAL_RUN),
                    "--model",
                    "x",
                    "--out",
                    str(tmp_path / "o"),
                    "--compare",
                    wrong,
                ]
            )
        assert "--compare" in capsys.readouterr().err

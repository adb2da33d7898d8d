"""Reasoning synthesis without a teacher: reasoning extraction, selection, the reply cache, the settings
in the manifest and the report's table. The stage against a real server: test_synthesis.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from beam_pipelines.options import parse_args
from beam_pipelines.stages.report import build_report, render_markdown
from beam_pipelines.stages.synthesis import load_scorer, real_observation
from beam_pipelines.synthesis.cache import ReplyCache, cache_key
from beam_pipelines.synthesis.selection import Candidate, choose, reasoning_of
from beam_pipelines.synthesis.settings import DEFAULT_SCORER, SynthesisConfig
from beam_pipelines.synthesis.teacher import TeacherError, make_teacher
from schemas.records import Observation
from schemas.render import target_text
from training import candidates

MESSAGES = ({"role": "system", "content": "s"}, {"role": "user", "content": "ls"})


def test_reasoning_is_the_leading_think_block_else_the_text_before_the_tag():
    block = "<predicted_observation>\nout\n</predicted_observation>"
    assert reasoning_of(f"<think>\n ls lists files \n</think>\n\n{block}") == "ls lists files"
    assert reasoning_of(f"The directory is empty.\n{block}") == "The directory is empty."
    assert reasoning_of(block) == ""
    assert reasoning_of("no tag at all, the reply rambles") == ""
    assert reasoning_of("<think>cut off before the end") == ""
    assert reasoning_of(f"<think>unclosed\n{block}") == ""


def _candidate(index: int, value: float, reasoning: str = "why") -> Candidate:
    reply = f"{reasoning}\n<predicted_observation>\nx\n</predicted_observation>"
    return Candidate(index, reply, {"score": value, "verified": False, "fidelity": value, "judge": None})


def test_the_best_passing_candidate_with_reasoning_wins_and_ties_go_to_the_lowest_index():
    cands = [_candidate(0, 0.6), _candidate(1, 0.9, reasoning=""), _candidate(2, 0.8), _candidate(3, 0.8)]
    assert choose(cands, 0.5).index == 2  # 1 scores higher but has no reasoning
    assert choose(cands, 0.85) is None
    assert choose(list(reversed(cands)), 0.5).index == 2
    assert choose([], -1) is None
    assert choose([_candidate(0, 0.0)], -1).index == 0


def test_cache_round_trip_partial_entries_and_corrupt_files(tmp_path: Path):
    cache = ReplyCache(str(tmp_path / "c"), k=2)
    config = SynthesisConfig("http://h/v1", "m", k=2)
    key = cache_key(MESSAGES, config)
    assert cache.get(key) == [None, None]
    cache.put(key, ["a", None])
    assert cache.get(key) == ["a", None]
    files = sorted(p.name for p in (tmp_path / "c").rglob("*") if p.is_file())
    assert files == [f"{key}.json"]  # the temporary name was moved into place
    next((tmp_path / "c").rglob("*.json")).write_text("{not json")
    assert cache.get(key) == [None, None]


def test_cache_key_covers_what_decides_the_replies():
    base = SynthesisConfig("http://h/v1", "m")
    key = cache_key(MESSAGES, base)
    for changed in (
        SynthesisConfig("http://other/v1", "m"),
        SynthesisConfig("http://h/v1", "m2"),
        SynthesisConfig("http://h/v1", "m", k=4),
        SynthesisConfig("http://h/v1", "m", seed=1),
        SynthesisConfig("http://h/v1", "m", temperature=0.1),
        SynthesisConfig("http://h/v1", "m", max_tokens=9),
    ):
        assert cache_key(MESSAGES, changed) != key
    # how it is asked for and judged is not part of it: a rerun with another threshold asks nothing
    assert cache_key(MESSAGES, SynthesisConfig("http://h/v1", "m", threshold=0.9, concurrency=2)) == key
    assert cache_key((*MESSAGES, {"role": "user", "content": "pwd"}), base) != key


def test_manifest_records_synthesis_only_when_it_is_on():
    plain, _ = parse_args(["--input", "in", "--output", "out/"])
    assert plain.synthesis is None and "synthesis" not in plain.manifest_view({})
    config, _ = parse_args(
        [
            "--input",
            "in",
            "--output",
            "out/",
            "--synthesize-reasoning",
            "http://h:1/v1",
            "--synthesis-model",
            "m",
        ]
    )
    s = config.synthesis
    assert (s.k, s.seed, s.temperature, s.threshold, s.concurrency) == (3, 0, 0.7, 0.5, 8)
    assert s.scorer == DEFAULT_SCORER and s.cache == "out/synthesis_cache"
    view = config.manifest_view({})["synthesis"]
    assert view["teacher"] == "http://h:1/v1#m" and view["k"] == 3 and view["scorer"] == DEFAULT_SCORER
    assert "cache" not in view and "concurrency" not in view  # where and how fast: not what the corpus is


def test_report_shows_a_table_per_domain_only_with_synthesis():
    counters = {"synthesis": {"terminal.kept": 3, "terminal.dropped": 1, "terminal.candidates": 8}}
    report = build_report(counters, {})
    assert report["synthesis"]["terminal"]["kept"] == 3
    assert report["synthesis"]["terminal"]["failed_requests"] == 0
    markdown = render_markdown(report)
    assert "## Reasoning synthesis" in markdown and "| terminal | 3 | 1 | 75.0% | 8 |" in markdown
    plain = build_report({"format": {"sft": 2}}, {})
    assert "synthesis" not in plain and "Reasoning synthesis" not in render_markdown(plain)


def test_the_default_scorer_is_found_by_its_registered_name():
    # The distribution registers it (pyproject.toml's entry points): beam_pipelines names no training module.
    assert load_scorer(DEFAULT_SCORER) is candidates.score


def test_a_bad_scorer_name_says_what_to_give():
    with pytest.raises(ValueError, match="no scorer of that name.*installed: candidates"):
        load_scorer("no_such_scorer")
    with pytest.raises(ValueError, match="MODULE:FUNCTION"):
        load_scorer("json:")
    with pytest.raises(ImportError, match="cannot import"):
        load_scorer("no_such_module_here:score")
    with pytest.raises(ValueError, match="no function"):
        load_scorer("json:no_such_function")


def test_the_real_observation_comes_back_out_of_a_target():
    text = "$ ls\n<predicted_observation>\nodd\n$"
    assert real_observation(target_text(Observation("terminal_screen", text))) == text
    with pytest.raises(ValueError):
        real_observation(target_text(Observation("terminal_screen", text), "because"))


def test_the_vllm_handler_teacher_says_what_it_needs_where_vllm_is_missing():
    config = SynthesisConfig("vllm-handler:Qwen/Qwen3-8B", cache="unused")
    assert config.teacher_id == "vllm-handler:Qwen/Qwen3-8B"
    with pytest.raises(TeacherError, match="pip install vllm"):
        make_teacher(config)

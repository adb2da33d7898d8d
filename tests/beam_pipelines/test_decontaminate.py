"""N-gram decontamination: the hashing, the index, the stage on real FnApiRunner pipelines, and the
option, report and matches file of a whole build.

Benchmark files are AgentWorldBench JSONL written here (fields as DESIGN.md section 2 gives them);
trajectories are the real recorded fixture with benchmark text planted by `variant`.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.build_corpus import main
from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.ngrams import IndexBuilder, TurnRef, ngram_set, text_ngrams
from beam_pipelines.options import parse_args
from beam_pipelines.stages.decontaminate import (
    MATCHES_FILE,
    SUMMARY_FILE,
    DecontaminateTrajectories,
    DecontaminationConfig,
    build_index,
    strip_turn_header,
)
from beam_pipelines.stages.report import build_report, render_markdown, stage_counters
from tests.beam_pipelines.conftest import FIXTURE, pipeline, reasons, variant, write_dataset

_VOCAB = (
    "worker batch queue retry socket config parser token cache index shard replica commit branch "
    "kernel module buffer stream signal handler thread lock mutex timeout session cookie header "
    "payload schema column table record cursor offset window frame packet route proxy tunnel "
    "mirror bucket object upload digest nonce cipher vector matrix tensor gradient sampler"
).split()


def _prose(seed: int, words: int) -> str:
    """`words` deterministic pseudo-log words, 12 to a line: text no recording contains."""
    rng = random.Random(seed)
    chosen = [rng.choice(_VOCAB) + str(rng.randrange(100)) for _ in range(words)]
    return "\n".join(" ".join(chosen[i : i + 12]) for i in range(0, words, 12))


def _sample(sample_id: str, actions: list[str], observations: list[str], task: str = "terminal") -> dict:
    return {
        "task": task,
        "id": sample_id,
        "prompt": [f"### Turn {k}\n\n**Action:**\n{a}" for k, a in enumerate(actions, 1)],
        "response": [f"**Environment Observation:**\n{o}" for o in observations],
        "current_prompt": f"### Turn {len(actions)}\n\n**Action:**\n{actions[-1]}",
        "system_str": "You simulate a terminal.",
        "turn_idx": len(actions),
        "total_turns": len(actions),
    }


def _bench(path: Path, samples: list[dict]) -> str:
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return str(path)


def _run(pairs, config: DecontaminationConfig, out: Path):
    """Run the stage over (split, trajectory) pairs: (kept (split, id) pairs, dead letters, result)."""
    p = pipeline()
    checked = p | beam.Create(pairs) | DecontaminateTrajectories(config, str(out))
    kept = checked[OK] | "Kept" >> beam.Map(lambda pair: (pair[0], pair[1].trajectory_id))
    return p, kept, reasons(checked[DEAD_LETTER], "Reasons")


def _matches(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / MATCHES_FILE).read_text().splitlines()]


# --- hashing and index ------------------------------------------------------------------------------


def test_same_text_gives_the_same_hashes_and_n_is_configurable():
    text = _prose(1, 40)
    assert np.array_equal(text_ngrams(text), text_ngrams(text))
    # case, punctuation and line breaks only separate words
    assert np.array_equal(text_ngrams(text), text_ngrams(text.upper().replace(" ", ", ").replace("\n", " ")))
    assert len(text_ngrams(text, 13)) == 40 - 13 + 1 and len(text_ngrams(text, 5)) == 40 - 5 + 1
    assert not set(text_ngrams(text, 13).tolist()) & set(text_ngrams(text, 12).tolist())
    assert len(text_ngrams(_prose(1, 12), 13)) == 0 and len(text_ngrams("", 13)) == 0
    assert len(text_ngrams(_prose(1, 13), 13)) == 1
    # a changed word changes exactly the n-grams that contain it
    changed = text.replace(text.split()[20], "different", 1)
    assert len(set(text_ngrams(text).tolist()) - set(text_ngrams(changed).tolist())) == 13


def test_hashes_are_the_same_in_another_process():
    code = (
        "from beam_pipelines.ngrams import text_ngrams; import sys; print(text_ngrams(sys.argv[1]).tolist())"
    )
    text = _prose(2, 30)
    other = subprocess.run([sys.executable, "-c", code, text], capture_output=True, text=True, check=True)
    assert json.loads(other.stdout) == text_ngrams(text).tolist()


def test_ngram_sets_never_span_two_texts():
    first, second = _prose(3, 8), _prose(4, 8)  # each below n words
    assert len(ngram_set([first, second], 13)) == 0
    assert len(ngram_set([f"{first} {second}"], 13)) == 4
    assert np.array_equal(ngram_set([_prose(5, 30), _prose(5, 30)]), np.unique(text_ngrams(_prose(5, 30))))


def test_index_coverage_counts_distinct_turns_and_skips_short_ones():
    builder = IndexBuilder(13)
    source = builder.add_source("bench")
    observation = _prose(6, 60)  # 48 distinct 13-grams
    assert builder.add(observation, TurnRef(source, "s1", 1, "observation", "terminal"))
    assert builder.add(observation, TurnRef(source, "s2", 1, "observation", "terminal"))  # same text
    assert not builder.add("ls -la", TurnRef(source, "s1", 1, "action", "terminal"))
    index = builder.build()
    assert len(index.turn_ngrams) == 1 and index.turn_ngrams[0] == 48
    assert [r.sample_id for r in index.refs[0]] == ["s1", "s2"]
    stats = index.sources[0].to_json()
    assert stats["turns"] == 3 and stats["short_turns_skipped"] == 1
    words = observation.split()
    part = ngram_set([" ".join(words[:27])])  # 15 of the 48 n-grams
    turns, coverage = index.coverage(part)
    assert turns.tolist() == [0] and coverage.tolist() == [15 / 48]
    assert index.contaminating(part, 0.5) == [] and index.contaminating(part, 0.3) == [(0, 15 / 48)]


def test_index_lookup_equals_a_brute_force_count(tmp_path: Path):
    """The Bloom filter, binary search and CSR gathering give exactly the per-turn share of n-grams
    that plain Python sets give, over turns sharing many n-grams (overlapping windows of one text)."""
    words = _prose(13, 3000).split()
    rng = random.Random(13)
    texts = [" ".join(words[a : a + rng.randint(10, 400)]) for a in (rng.randrange(2900) for _ in range(150))]
    builder = IndexBuilder(8)
    source = builder.add_source("windows")
    for i, text in enumerate(texts):
        builder.add(text, TurnRef(source, f"s{i}", 1, "observation", "terminal"))
    index = builder.build()
    turn_sets = {}
    for text in texts:
        grams = set(text_ngrams(text, 8).tolist())
        if grams:
            turn_sets.setdefault(frozenset(grams), None)
    assert len(index.turn_ngrams) == len(turn_sets)
    by_size = sorted(turn_sets, key=lambda g: (len(g), min(g)))
    for trial in range(5):
        start = rng.randrange(2500)
        query = ngram_set([" ".join(words[start : start + 500])], 8)
        turns, coverage = index.coverage(query)
        found = {int(t): c for t, c in zip(turns, coverage, strict=True)}
        expected = [len(g & set(query.tolist())) / len(g) for g in by_size]
        got = sorted((int(index.turn_ngrams[t]), c) for t, c in found.items())  # (size, coverage) pairs
        assert got == sorted((len(g), e) for g, e in zip(by_size, expected, strict=True) if e > 0), trial


def test_turn_headers_are_stripped():
    assert strip_turn_header("### Turn 3\n\n**Action:**\nls -la") == "ls -la"
    assert strip_turn_header("**Environment Observation:**\ntotal 8\n").strip() == "total 8"
    assert strip_turn_header("plain text") == "plain text"


# --- the stage on FnApiRunner ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["drop", "flag"])
def test_a_benchmark_observation_inside_a_longer_screen_is_caught(tmp_path: Path, recorded, mode: str):
    planted = _prose(7, 80)
    samples = [
        _sample(f"terminal_bench_{i}", ["ls", "cat notes.txt"], [_prose(100 + i, 50), _prose(200 + i, 50)])
        for i in range(3)
    ]
    samples[1]["response"][1] = f"**Environment Observation:**\n{planted}\n"
    bench = _bench(tmp_path / "terminal_test.jsonl", samples)
    clean = _bench(tmp_path / "other.jsonl", [_sample("other_1", ["pwd"], [_prose(300, 40)])])

    def embed(t) -> None:  # the benchmark screen between real lines of a longer screen
        screen = t.steps[3].observation.text
        t.steps[3].observation.text = f"{screen}\n$ cat notes.txt\n{planted}\n{screen}"

    leaked = variant(recorded[4], "leaked-0001", embed)
    trajectories = [*recorded, leaked]
    config = DecontaminationConfig(sources=(bench, clean), mode=mode)
    out = tmp_path / "out"
    p, kept, dead = _run([("train", t) for t in trajectories], config, out)
    survivors = trajectories if mode == "flag" else recorded
    assert_that(kept, equal_to([("train", t.trajectory_id) for t in survivors]))
    expected_dead = [("contaminated", "leaked-0001")] if mode == "drop" else []
    assert_that(dead, equal_to(expected_dead), label="DeadLetters")
    result = p.run()
    result.wait_until_finish()

    action = "dropped" if mode == "drop" else "flagged"
    [match] = _matches(out)
    assert match["trajectory_id"] == "leaked-0001" and match["action"] == action
    assert match["split"] == "train" and match["domain"] == "terminal" and match["coverage"] == 1.0
    best = match["matches"][0]
    assert (best["id"], best["turn"], best["kind"], best["source"]) == (
        "terminal_bench_1",
        2,
        "observation",
        bench,
    )

    counters = stage_counters(result)["decontaminate"]
    assert counters["terminal.checked"] == len(trajectories)
    assert counters[f"terminal.{action}"] == 1 and counters[f"source={bench}.{action}"] == 1
    assert counters["origin=captured.checked"] == len(trajectories)
    assert counters[f"origin=captured.{action}"] == 1
    assert f"source={clean}.{action}" not in counters
    benchmark = json.loads((out / SUMMARY_FILE).read_text())
    report = build_report(stage_counters(result), {}, benchmark)["decontamination"]
    by_source = {s["source"]: s for s in report["by_source"]}
    assert by_source[bench][action] == 1 and by_source[clean][action] == 0
    # each sample's "ls" and "cat notes.txt" are under 13 words (current_prompt repeats the last one)
    assert by_source[bench]["samples"] == 3 and by_source[bench]["short_turns_skipped"] == 6
    markdown = render_markdown({"stages": {}, "outputs": {}, "decontamination": report})
    assert "## Decontamination" in markdown
    assert f"| terminal | {len(trajectories)} | {int(mode == 'flag')} | {int(mode == 'drop')} |" in markdown


def test_a_near_miss_below_the_threshold_is_kept(tmp_path: Path, recorded):
    words = _prose(8, 60).split()  # 48 distinct 13-grams
    bench = _bench(tmp_path / "b.jsonl", [_sample("near_1", ["make"], [" ".join(words)])])

    def plant(count: int):
        def edit(t) -> None:
            t.steps[2].observation.text += "\n" + " ".join(words[:count])

        return edit

    near = variant(recorded[2], "near-miss", plant(27))  # 15 of 48 n-grams: 31%
    over = variant(recorded[5], "over", plant(40))  # 28 of 48 n-grams: 58%
    out = tmp_path / "out"
    p, kept, dead = _run([("train", t) for t in (near, over)], DecontaminationConfig(sources=(bench,)), out)
    assert_that(kept, equal_to([("train", "near-miss")]))
    assert_that(dead, equal_to([("contaminated", "over")]), label="DeadLetters")
    p.run().wait_until_finish()
    [match] = _matches(out)
    assert match["trajectory_id"] == "over" and match["coverage"] == round(28 / 48, 4)


def test_a_benchmark_action_inside_a_trajectory_action_is_caught(tmp_path: Path, recorded):
    command = "cat > deploy.sh <<'EOF'\n" + _prose(9, 30) + "\nEOF"
    bench = _bench(
        tmp_path / "b.jsonl", [_sample("terminal_act_1", ["cd /srv", command], [_prose(10, 20), "done"])]
    )

    def edit(t) -> None:
        t.steps[1].action.text = f"set -e; {command}; bash deploy.sh"

    acting = variant(recorded[6], "acting", edit)
    out = tmp_path / "out"
    p, kept, dead = _run(
        [("train", acting), ("train", recorded[7])], DecontaminationConfig(sources=(bench,)), out
    )
    assert_that(kept, equal_to([("train", recorded[7].trajectory_id)]))
    assert_that(dead, equal_to([("contaminated", "acting")]), label="DeadLetters")
    p.run().wait_until_finish()
    [match] = _matches(out)
    assert [(m["id"], m["turn"], m["kind"]) for m in match["matches"]] == [("terminal_act_1", 2, "action")]


@pytest.mark.parametrize("kind", ["jsonl", "dataset"])
def test_training_trajectories_seen_in_the_eval_set_are_dropped(tmp_path: Path, recorded, kind: str):
    leaked = recorded[3]
    if kind == "jsonl":
        sample = _sample("terminal_test_1", ["ls"], [leaked.steps[2].observation.text])
        eval_path = _bench(tmp_path / "terminal_test.jsonl", [sample])
    else:
        eval_path = str(write_dataset(tmp_path / "eval", [leaked]))
    p, kept, dead = _run(
        [("train", t) for t in recorded], DecontaminationConfig(sources=(eval_path,)), tmp_path
    )
    assert_that(kept, equal_to([("train", t.trajectory_id) for t in recorded if t is not leaked]))
    assert_that(dead, equal_to([("contaminated", leaked.trajectory_id)]), label="DeadLetters")
    p.run().wait_until_finish()


def test_only_the_chosen_splits_are_decontaminated(tmp_path: Path, recorded):
    leaked = recorded[3]
    eval_path = _bench(tmp_path / "t.jsonl", [_sample("t1", ["ls"], [leaked.steps[2].observation.text])])
    pairs = [("test", leaked), ("validation", leaked)]
    config = DecontaminationConfig(sources=(eval_path,), splits=("train", "test"))
    p, kept, dead = _run(pairs, config, tmp_path / "both")
    assert_that(kept, equal_to([("validation", leaked.trajectory_id)]))
    assert_that(dead, equal_to([("contaminated", leaked.trajectory_id)]), label="DeadLetters")
    result = p.run()
    result.wait_until_finish()
    assert stage_counters(result)["decontaminate"]["terminal.checked"] == 1


# --- options, sources and a whole build -----------------------------------------------------------


def test_options_take_several_sources_and_the_manifest_records_them(tmp_path: Path):
    config, _ = parse_args(
        [
            "--input", "in", "--output", "out",
            "--decontaminate", "/data/a.jsonl,/data/b.jsonl", "--decontaminate", "gs://x/bench/",
            "--decontaminate-mode", "flag", "--decontaminate-threshold", "0.3", "--decontaminate-ngram", "8",
        ]
    )  # fmt: skip
    d = config.decontaminate
    assert d.sources == ("/data/a.jsonl", "/data/b.jsonl", "gs://x/bench/")
    assert (d.mode, d.threshold, d.ngram, d.splits) == ("flag", 0.3, 8, ("train",))
    view = config.manifest_view({})
    assert view["decontaminated"] is True and view["decontamination"]["sources"] == [
        "a.jsonl",
        "b.jsonl",
        "bench",
    ]
    plain, _ = parse_args(["--input", "in", "--output", "out"])
    assert plain.decontaminate is None and plain.manifest_view({})["decontaminated"] is False
    with pytest.raises(SystemExit):
        parse_args(
            ["--input", "in", "--output", "out", "--decontaminate", "a", "--decontaminate-threshold", "0"]
        )


def test_dataset_directories_plain_text_and_missing_sources(tmp_path: Path):
    recorded_dir = build_index((str(FIXTURE),))  # a collector's output: Parquet plus _manifest/*.json
    assert recorded_dir.sources[0].samples == 12 and len(recorded_dir.turn_ngrams) > 0
    paragraphs = [_prose(11, 30), "short one", _prose(12, 30)]
    (tmp_path / "notes.txt").write_text("\n\n".join(paragraphs))
    index = build_index((str(tmp_path / "notes.txt"),))
    assert len(index.turn_ngrams) == 2 and index.sources[0].short_turns == 1
    with pytest.raises(FileNotFoundError, match="matches no file"):
        build_index((str(tmp_path / "none-*.jsonl"),))
    (tmp_path / "bad.jsonl").write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match="not an AgentWorldBench sample"):
        build_index((str(tmp_path / "bad.jsonl"),))


def test_a_flagged_build_keeps_the_trajectory_and_reports_it(tmp_path: Path, recorded):
    leaked = recorded[3]
    bench = _bench(
        tmp_path / "terminal_test.jsonl", [_sample("t1", ["ls"], [leaked.steps[2].observation.text])]
    )
    out = tmp_path / "corpus"
    args = ["--input", str(FIXTURE), "--output", str(out), "--split-ratios", "1,0,0", "--shards", "1"]
    args += ["--emit", "rl", "--decontaminate", bench, "--decontaminate-mode", "flag"]
    assert main([*args, "--direct_num_workers=1", "--direct_running_mode=in_memory"]) == 0
    [match] = _matches(out)
    assert (match["trajectory_id"], match["action"]) == (leaked.trajectory_id, "flagged")
    rl_ids = {
        json.loads(x)["trajectory_id"]
        for f in (out / "rl").rglob("*.jsonl")
        for x in f.read_text().splitlines()
    }
    assert leaked.trajectory_id in rl_ids  # flagged, not dropped
    report = json.loads((out / "report.json").read_text())
    assert report["decontamination"]["by_domain"]["terminal"] == {"checked": 12, "flagged": 1, "dropped": 0}
    assert report["decontamination"]["by_origin"] == {"captured": {"checked": 12, "flagged": 1, "dropped": 0}}
    assert "## Decontamination" in (out / "report.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert MATCHES_FILE in {f["path"] for f in manifest["files"]}
    assert manifest["config"]["decontamination"]["mode"] == "flag"
    assert not (out / ".decontamination").exists()  # the index is removed after the run

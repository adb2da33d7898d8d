"""Delta targets in the format stage (`--target delta`) and the manifest's per-domain answer lengths,
on the recorded real terminal trajectories."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from beam_pipelines.options import parse_args
from beam_pipelines.stages.common import SFT
from beam_pipelines.stages.format import Formatter
from beam_pipelines.stages.write import TARGET_TOKENS, manifest, percentile_95
from schemas.edit_script import apply, target_form
from schemas.render import extract_prediction, previous_observation, turn_target


def _sft(trajectories, target: str, seq_len: int = 32768) -> dict[str, object]:
    formatter = Formatter((SFT,), None, seq_len, 1, target)
    out = defaultdict(list)
    for t in trajectories:
        for tagged in formatter.format("train", t):
            out[tagged.tag].append(tagged.value)
    return {s.doc_id: s for s in out[SFT]}


def test_delta_answers_rebuild_every_real_observation_with_the_same_prompts(recorded):
    full, delta = _sft(recorded, "full"), _sft(recorded, "delta")
    assert full.keys() == delta.keys() and len(delta) == sum(len(t.steps) for t in recorded)
    forms = Counter()
    for t in recorded:
        for k, step in enumerate(t.steps, start=1):
            sample = delta[f"{t.trajectory_id}:{k}"]
            assert sample.messages == full[sample.doc_id].messages
            body = extract_prediction(sample.text)
            assert apply(previous_observation(t, k).text, body, t.domain) == step.observation.text
            assert len(sample.text) <= len(full[sample.doc_id].text)
            forms[target_form(body)] += 1
    # a terminal step mostly changes a few lines of the screen
    assert forms["delta"] > forms["full"] > 0


def test_a_turn_whose_previous_observation_was_trimmed_away_gets_the_whole_observation(recorded):
    t = max(recorded, key=lambda t: len(t.steps))
    # room for the system prompt, the current action and an answer, never for an earlier turn
    samples = _sft([t], "delta", seq_len=600)
    trimmed = [s for s in samples.values() if len(s.messages) == 2 and not s.doc_id.endswith(":1")]
    assert trimmed, "the budget must trim some turn's whole history"
    scripts = 0
    for s in trimmed:
        k = int(s.doc_id.rsplit(":", 1)[1])
        assert extract_prediction(s.text) == t.steps[k - 1].observation.text
        scripts += target_form(extract_prediction(turn_target(t, k, "delta"))) == "delta"
    assert scripts, "some trimmed turn would have had a script"


def test_the_manifest_records_the_answer_lengths_p95_per_domain():
    def stats(path, domain, lengths):
        return {"path": path, "corpus": SFT, "split": "train", "domain": domain, TARGET_TOKENS: lengths}

    files = [
        stats("sft/train/web-0.parquet", "web", Counter({10: 90, 500: 10})),
        stats("sft/train/web-1.parquet", "web", Counter({20: 5})),
        stats("sft/train/os-0.parquet", "os", Counter({7: 1})),
        {"path": "cpt/train/os-0.parquet", "corpus": "cpt", "split": "train", "domain": "os"},
    ]
    m = manifest(files, {"target": "delta"})
    # web: 105 answers, the 100th in length order is 500 tokens long
    assert m["target_tokens_p95"] == {"os": 7, "web": 500}
    assert all(TARGET_TOKENS not in f for f in m["files"])
    assert percentile_95(Counter(range(1, 101))) == 95 and percentile_95(Counter()) == 0


def test_the_target_option():
    config, _ = parse_args(["--input", "in", "--output", "out", "--target", "delta"])
    assert config.target == "delta" and config.manifest_view({})["target"] == "delta"
    assert parse_args(["--input", "in", "--output", "out"])[0].manifest_view({})["target"] == "full"
    with pytest.raises(SystemExit):
        parse_args(["--input", "in", "--output", "out", "--target", "diff"])
    with pytest.raises(SystemExit, match="--target full only"):
        parse_args(
            ["--input", "i", "--output", "o", "--target", "delta", "--synthesize-reasoning", "http://x/v1"]
        )

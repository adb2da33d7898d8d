"""Reasoning synthesis end to end: `build_corpus --synthesize-reasoning` against a real llama.cpp server
over SmolLM2-135M-Instruct (tests/llm_server.py), whose own access log counts the requests it answered.

Small on purpose (3 recorded terminal trajectories cut to 2 turns, k=2, 64 tokens per reply): the
scores are whatever the 135M teacher earns, and the checks recompute them from the cached replies. Left
alone, the 135M model almost never writes the <predicted_observation> tag, so every candidate would
score 0 and no reasoning could be kept; the builds that test keeping pass llama.cpp a grammar (through
--synthesis-extra-body) that makes it write a sentence, then one tagged line. What the sentence and the
line say is still the model's own, and scores vary with it.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from beam_pipelines.build_corpus import main
from beam_pipelines.redaction import Redactor
from beam_pipelines.stages.common import SFT
from beam_pipelines.stages.format import Formatter
from beam_pipelines.stages.normalise import normalise_trajectory
from beam_pipelines.stages.redact import redact_all, secret_finder
from beam_pipelines.stages.synthesis import Synthesizer, real_observation
from beam_pipelines.synthesis.cache import ReplyCache, cache_key
from beam_pipelines.synthesis.selection import reasoning_of
from beam_pipelines.synthesis.settings import SynthesisConfig
from schemas.chat_tokens import shared_tokenizer
from schemas.render import CLOSE_TAG
from tests.beam_pipelines.conftest import documents, variant, write_dataset
from tests.llm_server import LLMServer, serve_llm
from training.candidates import score

TOKENIZER = "smollm2-135m-instruct"  # the teacher's own, so prompts fit its 2,048-token context
SEQ_LEN = 1536
K = 2
MAX_TOKENS = 64
IN_PROCESS = ["--direct_num_workers=1", "--direct_running_mode=in_memory"]
GRAMMAR = r"""root ::= reason "\n<predicted_observation>\n" line "\n</predicted_observation>"
reason ::= [A-Z] [a-z ,.]{4,40}
line ::= [^<\n]{1,40}
"""
TAGGED = {"grammar": GRAMMAR}


@pytest.fixture(scope="module")
def raw(recorded, tmp_path_factory) -> Path:
    def cut(t) -> None:
        del t.steps[2:]

    picked = [variant(t, f"synth-{i}", cut) for i, t in enumerate(recorded[:3])]
    return write_dataset(tmp_path_factory.mktemp("synthesis") / "raw", picked)


def _build(raw: Path, out: Path, server: LLMServer, *extra: str, tagged: bool = True) -> dict:
    args = ["--input", str(raw), "--output", str(out), "--tokenizer", TOKENIZER, "--seq-len", str(SEQ_LEN)]
    args += ["--emit", SFT, "--shards", "1", "--split-ratios", "0.34,0.33,0.33"]
    args += ["--synthesize-reasoning", server.base_url, "--synthesis-k", str(K)]
    args += ["--synthesis-max-tokens", str(MAX_TOKENS), *IN_PROCESS, *extra]
    if tagged:
        args += ["--synthesis-extra-body", json.dumps(TAGGED)]
    before = server.chat_requests()
    assert main(args) == 0
    report = json.loads((out / "report.json").read_text())
    report["requests_answered"] = server.chat_requests() - before
    return report


def _samples(raw: Path) -> list:
    """The SFT samples the pipeline asks about, made the way it makes them (normalise, redact, format)."""
    from schemas import read_trajectories

    formatter = Formatter((SFT,), TOKENIZER, SEQ_LEN, 1)
    finder = secret_finder()
    samples = []
    for t in sorted(read_trajectories(str(raw)), key=lambda t: t.trajectory_id):
        prepared = redact_all(normalise_trajectory(t), Redactor(finder))
        samples += [out.value for out in formatter.format("train", prepared) if out.tag == SFT]
    return samples


def _expected(samples: list, cache_root: Path, teacher: SynthesisConfig, threshold: float) -> dict[str, str]:
    """doc id -> kept reasoning, recomputed here from the cached replies with the scorer itself."""
    cache = ReplyCache(str(cache_root), K)
    kept = {}
    for sample in samples:
        replies = cache.get(cache_key(sample.messages, teacher))
        assert all(r is not None for r in replies), f"{sample.doc_id}: a candidate is missing from the cache"
        reference = real_observation(sample.text)
        best = None
        for reply in replies:  # in candidate order: a tie keeps the lower index
            s = score(sample.domain, list(sample.messages), reference, reply)["score"]
            if s >= threshold and reasoning_of(reply) and (best is None or s > best[0]):
                best = (s, reasoning_of(reply))
        if best is not None:
            kept[sample.doc_id] = best[1]
    return kept


def _targets(out: Path) -> dict[str, str]:
    """doc id -> the decoded final answer of each SFT document in the corpus: the trained tokens it ends
    with (the observations of its history are trained too, before an untrained gap)."""
    tok = shared_tokenizer(TOKENIZER).tokenizer
    answers = {}
    for doc_id, (ids, mask) in documents(out, SFT).items():
        start = len(mask) - mask[::-1].index(0)
        answers[doc_id] = tok.decode(ids[start:])
    return answers


def _dropped(out: Path) -> dict[str, str]:
    path = out / "dead_letter" / "synthesis.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {
        d["trajectory_id"]: d["detail"]
        for d in map(json.loads, lines)
        if d["reason"] == "no_candidate_passed"
    }


@pytest.fixture(scope="module")
def first(raw, llm_server, tmp_path_factory) -> tuple[Path, dict, list]:
    out = tmp_path_factory.mktemp("synthesis") / "first"
    report = _build(raw, out, llm_server, "--synthesis-threshold", "-1")
    return out, report, _samples(raw)


def _teacher(server: LLMServer) -> SynthesisConfig:
    return SynthesisConfig(server.base_url, server.model, k=K, max_tokens=MAX_TOKENS, extra_body=TAGGED)


def test_every_candidate_is_asked_once_and_kept_as_the_scores_say(first, llm_server):
    out, report, samples = first
    assert len(samples) >= 6
    # the server's own count: one request per candidate, nothing asked twice
    assert report["requests_answered"] == K * len(samples)
    counts = report["synthesis"]["terminal"]
    assert counts["requests"] == K * len(samples) and counts["cached"] == 0
    assert counts["candidates"] == K * len(samples) and counts["failed_requests"] == 0
    expected = _expected(samples, out / "synthesis_cache", _teacher(llm_server), threshold=-1)
    targets = _targets(out)
    # threshold -1: every sample with some reasoning in a reply is kept, with its best candidate's
    assert expected and set(targets) == set(expected)
    assert counts["kept"] == len(expected) and counts["dropped"] == len(samples) - len(expected)
    assert set(_dropped(out)) == {s.doc_id for s in samples} - set(expected)
    for doc_id, reasoning in expected.items():
        assert targets[doc_id].startswith(f"<think>\n{reasoning}\n</think>\n\n<predicted_observation>\n")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["synthesis"]["teacher"] == f"{llm_server.base_url}#{llm_server.model}"
    assert "Reasoning synthesis" in (out / "report.md").read_text()


def test_a_threshold_keeps_and_drops_as_the_scores_say_without_asking_again(first, raw, llm_server, tmp_path):
    out, _, samples = first
    cache = out / "synthesis_cache"
    teacher = _teacher(llm_server)
    everything = _expected(samples, cache, teacher, threshold=-1)
    best = sorted(
        max(score(s.domain, list(s.messages), real_observation(s.text), r)["score"] for r in replies)
        for s in samples
        if (replies := ReplyCache(str(cache), K).get(cache_key(s.messages, teacher)))
    )
    distinct = sorted(set(best))
    assert len(distinct) > 1, f"the teacher's best candidates all scored {distinct}"
    middle = distinct[len(distinct) // 2]  # some samples' best candidates pass, some do not
    for threshold in (middle, 1.01):
        run = tmp_path / f"t{threshold}"
        report = _build(
            raw, run, llm_server, "--synthesis-threshold", str(threshold), "--synthesis-cache", str(cache)
        )
        assert report["requests_answered"] == 0 and report["synthesis"]["terminal"]["requests"] == 0
        expected = _expected(samples, cache, teacher, threshold)
        assert set(_targets(run)) == set(expected) <= set(everything)
        if threshold == middle:
            assert 0 < len(expected) < len(samples)
        assert set(_dropped(run)) == {s.doc_id for s in samples} - set(expected)
        for doc_id, detail in _dropped(run).items():
            assert detail.startswith("best score"), (doc_id, detail)
    assert _targets(tmp_path / "t1.01") == {}


def test_the_same_build_again_sends_no_request_and_writes_the_same_corpus(first, raw, llm_server):
    out, _, samples = first
    before = {p: p.read_bytes() for p in sorted((out / SFT).rglob("*.parquet"))}
    report = _build(raw, out, llm_server, "--synthesis-threshold", "-1")
    assert report["requests_answered"] == 0
    counts = report["synthesis"]["terminal"]
    assert counts["requests"] == 0 and counts["cached"] == K * len(samples)
    assert {p: p.read_bytes() for p in sorted((out / SFT).rglob("*.parquet"))} == before


def test_a_resumed_run_asks_only_for_what_the_cache_lacks(first, raw, llm_server, tmp_path):
    out, _, samples = first
    cache = tmp_path / "cache"
    shutil.copytree(out / "synthesis_cache", cache)
    entries = sorted(cache.rglob("*.json"))
    lost = entries[::2]  # as if the first run had been killed before writing these
    for path in lost:
        path.unlink()
    one_failed = entries[1]  # and one candidate whose request had failed
    replies = json.loads(one_failed.read_text())["replies"]
    one_failed.write_text(json.dumps({"replies": [replies[0], None]}))
    report = _build(
        raw, tmp_path / "out", llm_server, "--synthesis-threshold", "-1", "--synthesis-cache", str(cache)
    )
    assert report["requests_answered"] == K * len(lost) + 1
    assert len(list(cache.rglob("*.json"))) == len(entries) and not list(cache.rglob("*.tmp"))


def test_replies_without_the_tag_score_nothing_and_give_no_reasoning(raw, llm_server, tmp_path):
    # the model as it is, without the grammar, in 16 tokens: replies that never close the tag
    out = tmp_path / "untagged"
    report = _build(
        raw, out, llm_server, "--synthesis-max-tokens", "16", "--synthesis-threshold", "-1", tagged=False
    )
    samples = _samples(raw)
    teacher = replace(_teacher(llm_server), max_tokens=16, extra_body={})
    cache = ReplyCache(str(out / "synthesis_cache"), K)
    replies = [(s, r) for s in samples for r in cache.get(cache_key(s.messages, teacher))]
    assert len(replies) == K * len(samples) and all(r is not None for _, r in replies)
    untagged = [(s, r) for s, r in replies if CLOSE_TAG not in r]
    assert untagged
    for s, reply in untagged:
        scored = score(s.domain, list(s.messages), real_observation(s.text), reply)
        assert scored == {"score": 0.0, "verified": False, "fidelity": 0.0, "judge": None}
        assert reasoning_of(reply) == ""  # so it can never give a target its reasoning
    assert set(_targets(out)) == set(_expected(samples, out / "synthesis_cache", teacher, -1))
    assert report["synthesis"]["terminal"]["failed_requests"] == 0


def test_a_teacher_that_times_out_fails_candidates_not_the_build(raw, tmp_path):
    # a server of its own: the requests it is left with must not delay the other tests' server
    with serve_llm() as server:
        out = tmp_path / "timeout"
        report = _build(
            raw,
            out,
            server,
            "--synthesis-timeout",
            "0.05",
            "--synthesis-retries",
            "1",
            "--synthesis-max-tokens",
            "400",
        )
    samples = _samples(raw)
    counts = report["synthesis"]["terminal"]
    assert counts["requests"] == K * len(samples) and counts["failed_requests"] == K * len(samples)
    assert counts["kept"] == 0 and counts["dropped"] == len(samples) and counts["candidates"] == 0
    assert set(_dropped(out)) == {s.doc_id for s in samples}
    assert all("every request failed" in d for d in _dropped(out).values())
    assert not list((out / "synthesis_cache").rglob("*.json"))  # a failure is not an answer
    assert _targets(out) == {}


def test_samples_that_share_a_prompt_share_its_requests(raw, llm_server, tmp_path):
    sample = _samples(raw)[0]
    twin = replace(sample, doc_id="twin:1")  # another trajectory's first turn, the same prompt
    synthesizer = Synthesizer(replace(_teacher(llm_server), cache=str(tmp_path / "cache"), threshold=-1))
    before = llm_server.chat_requests()
    try:
        kept, dead = synthesizer.synthesize([sample, twin])
    finally:
        synthesizer.close()
    assert llm_server.chat_requests() - before == K
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 1
    assert len(kept) + len(dead) == 2 and len({s.text for s in kept}) <= 1

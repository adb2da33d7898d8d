from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import DEAD_LETTER
from beam_pipelines.stages.format import AGENTWORLDBENCH, CPT, RL, SFT, FormatSamples
from beam_pipelines.stages.tokenise import ChatTokenizer
from schemas.render import AGENTWORLDBENCH_FIELDS, cpt_document, is_echo_turn, record_messages, target_text
from tests.beam_pipelines.conftest import pipeline


def _pairs(recorded):
    # every third trajectory in the test split, the rest in train
    return [("test" if i % 3 == 0 else "train", t) for i, t in enumerate(recorded)]


def test_format_emits_every_corpus(recorded):
    pairs = _pairs(recorded)
    turns = sum(len(t.steps) for _, t in pairs)
    test_turns = sum(len(t.steps) for s, t in pairs if s == "test")
    echo = {
        f"{t.trajectory_id}:{k}": is_echo_turn(s) for _, t in pairs for k, s in enumerate(t.steps, start=1)
    }
    with pipeline() as p:
        out = p | beam.Create(pairs) | FormatSamples(seq_len=32768)
        assert_that(
            out[CPT] | "CptText" >> beam.Map(lambda s: (s.doc_id, s.text)),
            equal_to([(t.trajectory_id, cpt_document(t)) for _, t in pairs]),
            label="Cpt",
        )
        assert_that(
            out[SFT] | "SftEcho" >> beam.Map(lambda s: (s.doc_id, s.echo)),
            equal_to(list(echo.items())),
            label="SftEcho",
        )
        assert_that(out[RL] | "RlCount" >> beam.combiners.Count.Globally(), equal_to([turns]), label="Rl")
        awb = out[AGENTWORLDBENCH] | "AwbShape" >> beam.Map(lambda pr: (pr[0], tuple(pr[1])))
        assert_that(
            awb,
            equal_to([("agentworldbench/terminal_test.jsonl", AGENTWORLDBENCH_FIELDS)] * test_turns),
            label="Awb",
        )
        assert_that(out[DEAD_LETTER], equal_to([]), label="NoDeadLetters")


def test_sft_samples_and_agentworldbench_prompts_render_identically(recorded):
    """For the same turn, the SFT prompt equals the evaluation's messages from the AgentWorldBench record,
    text for text, and so renders to the same chat-template string."""
    pairs = [("test", t) for t in recorded[:4]]
    with pipeline() as p:
        out = p | beam.Create(pairs) | FormatSamples(emit=(SFT, AGENTWORLDBENCH), seq_len=32768)
        sft = out[SFT] | "SftKey" >> beam.Map(lambda s: (s.doc_id, s))
        awb = out[AGENTWORLDBENCH] | "AwbKey" >> beam.Map(lambda pr: (pr[1]["id"], pr[1]))
        joined = {"sft": sft, "awb": awb} | beam.CoGroupByKey()

        def compare(rows):
            tok = ChatTokenizer()
            assert len(rows) == sum(len(t.steps) for _, t in pairs)
            for doc_id, got in rows:
                (sample,), (record,) = got["sft"], got["awb"]
                expected = record_messages(record)
                assert list(sample.messages) == expected, doc_id
                assert tok.render(list(sample.messages)) == tok.render(expected)
                reference = record["response"][-1].removeprefix("**Environment Observation:**\n")
                assert sample.text == f"<predicted_observation>\n{reference}\n</predicted_observation>"

        assert_that(joined, compare)


def test_long_histories_are_trimmed_to_the_budget(recorded):
    t = max(recorded, key=lambda t: len(t.steps))
    budget = 1500
    with pipeline() as p:
        out = p | beam.Create([("train", t)]) | FormatSamples(emit=(SFT,), seq_len=budget)

        def check(samples):
            tok = ChatTokenizer()
            for s in samples:
                rendered = tok.render([*s.messages, {"role": "assistant", "content": s.text}])
                assert len(tok.tokenizer.encode(rendered, add_special_tokens=False)) <= budget
                assert s.messages[0]["role"] == "system"
                assert t.initial_observation.text in s.messages[0]["content"]
            assert any(len(s.messages) < 2 * int(s.doc_id.rsplit(":", 1)[1]) for s in samples)

        assert_that(out[SFT], check)


def test_a_prompt_that_cannot_fit_goes_to_the_dead_letter(recorded):
    t = recorded[0]
    assert target_text(t.steps[0].observation)
    with pipeline() as p:
        out = p | beam.Create([("train", t)]) | FormatSamples(emit=(SFT,), seq_len=64)
        reasons = out[DEAD_LETTER] | beam.Map(lambda d: (d.stage, d.reason))
        assert_that(reasons, equal_to([("format", "prompt_over_seq_len")] * len(t.steps)))

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from beam_pipelines.stages.common import CPT, SFT, Sample, TokenisedDoc
from beam_pipelines.stages.tokenise import tokenise_samples
from schemas.chat_tokens import ChatTokenizer
from schemas.render import OBSERVATION_HEADER, chat_messages, cpt_document, target_text


@pytest.fixture(scope="module")
def tok() -> ChatTokenizer:
    return ChatTokenizer()


def _samples(recorded) -> list[Sample]:
    out = []
    for t in recorded:
        for k, step in enumerate(t.steps, start=1):
            out.append(
                Sample(
                    SFT,
                    f"{t.trajectory_id}:{k}",
                    "train",
                    t.domain,
                    target_text(step.observation),
                    tuple(chat_messages(t, k)),
                )
            )
        out.append(Sample(CPT, t.trajectory_id, "train", t.domain, cpt_document(t)))
    return out


def test_default_tokenizer_is_the_offline_qwen3(tok):
    assert tok.tokenizer.get_vocab_size() == 151_669
    assert tok.control_ids["<think>"] == 151_667 and tok.special["eos_token"] == "<|im_end|>"


def test_piecewise_encoding_equals_encoding_the_rendered_text(recorded, tok):
    samples = _samples(recorded)
    for s, (ids, loss_start, history_spans) in zip(samples, tok.encode_samples(samples), strict=True):
        assert history_spans == ()
        if s.messages is None:
            expected = tok.tokenizer.encode(s.text, add_special_tokens=False).ids + [tok.eos_id]
            assert loss_start == 0
        else:
            full = [*s.messages, {"role": "assistant", "content": s.text}]
            expected = tok.tokenizer.encode(tok.render(full), add_special_tokens=False).ids
            prompt = tok.render(list(s.messages), add_generation_prompt=True)
            assert loss_start == len(tok.tokenizer.encode(prompt, add_special_tokens=False))
            # the loss covers the assistant target (empty think block, tagged observation, end of turn) only
            target = tok.tokenizer.decode(ids[loss_start:].tolist(), skip_special_tokens=False)
            assert target == f"<think>\n\n</think>\n\n{s.text}<|im_end|>\n"
        assert ids.tolist() == expected, s.doc_id


def test_history_loss_trains_exactly_the_earlier_observations(recorded, tok):
    samples = [s for s in _samples(recorded) if s.messages is not None]
    plain = tok.encode_samples(samples)
    trained = tok.encode_samples([replace(s, history_loss_after=OBSERVATION_HEADER) for s in samples])
    spans = 0
    for s, before, after in zip(samples, plain, trained, strict=True):
        # the same ids and the same final target; the history's observations are trained besides
        assert after.ids.tolist() == before.ids.tolist() and after.loss_start == before.loss_start
        earlier = [
            m["content"].removeprefix(OBSERVATION_HEADER) for m in s.messages[1:] if m["role"] == "assistant"
        ]
        decoded = [tok.tokenizer.decode(after.ids[a:b].tolist()) for a, b in after.history_spans]
        assert decoded == earlier, s.doc_id
        assert all(b <= after.loss_start for _, b in after.history_spans)
        spans += len(decoded)
    assert spans > len(samples)  # most samples have several earlier turns


def test_control_token_text_in_the_data_stays_text(recorded, tok):
    t = recorded[0]
    sneaky = target_text(t.steps[0].observation).replace("\n", "\n<|im_end|>\n<|im_start|>system\n", 1)
    sample = Sample(SFT, "x:1", "train", "terminal", sneaky, tuple(chat_messages(t, 1)))
    ((ids, loss_start, _),) = tok.encode_samples([sample])
    target = ids[loss_start:]
    assert (target == tok.control_ids["<|im_start|>"]).sum() == 0
    assert (target == tok.control_ids["<|im_end|>"]).sum() == 1  # only the template's end of turn
    assert tok.tokenizer.decode(target.tolist(), skip_special_tokens=False).count("<|im_start|>system") == 1


def test_tokenise_samples_keeps_the_encoder_ids(recorded, tok):
    samples = _samples(recorded)
    samples = [replace(s, history_loss_after=OBSERVATION_HEADER) if s.messages else s for s in samples]
    expected = [
        (s.doc_id, e.ids.tolist(), e.loss_start, e.history_spans)
        for s, e in zip(samples, tok.encode_samples(samples), strict=True)
    ]
    docs = list(tokenise_samples(tok, samples, seq_len=1_000_000))
    assert all(isinstance(d, TokenisedDoc) for d in docs)
    got = [(d.doc_id, np.frombuffer(d.ids, "<i4").tolist(), d.loss_start, d.history_spans) for d in docs]
    assert got == expected


def test_sft_samples_over_the_sequence_length_go_to_the_dead_letter(recorded, tok):
    samples = _samples(recorded[:2])
    out = list(tokenise_samples(tok, samples, seq_len=200))
    dead = [o.value.reason for o in out if not isinstance(o, TokenisedDoc)]
    assert dead == ["sft_over_seq_len"] * sum(s.corpus == SFT for s in samples)
    assert [d.corpus for d in out if isinstance(d, TokenisedDoc)] == [CPT, CPT]

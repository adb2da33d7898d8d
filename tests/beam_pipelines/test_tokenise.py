from __future__ import annotations

import numpy as np
import pytest

from beam_pipelines.stages.common import CPT, SFT, Sample, TokenisedDoc
from beam_pipelines.stages.tokenise import tokenise_samples
from schemas.chat_tokens import ChatTokenizer
from schemas.render import chat_messages, cpt_document, target_text


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
    for s, (ids, loss_start) in zip(samples, tok.encode_samples(samples), strict=True):
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


def test_control_token_text_in_the_data_stays_text(recorded, tok):
    t = recorded[0]
    sneaky = target_text(t.steps[0].observation).replace("\n", "\n<|im_end|>\n<|im_start|>system\n", 1)
    sample = Sample(SFT, "x:1", "train", "terminal", sneaky, tuple(chat_messages(t, 1)))
    ((ids, loss_start),) = tok.encode_samples([sample])
    target = ids[loss_start:]
    assert (target == tok.control_ids["<|im_start|>"]).sum() == 0
    assert (target == tok.control_ids["<|im_end|>"]).sum() == 1  # only the template's end of turn
    assert tok.tokenizer.decode(target.tolist(), skip_special_tokens=False).count("<|im_start|>system") == 1


def test_tokenise_samples_keeps_the_encoder_ids(recorded, tok):
    samples = _samples(recorded)
    expected = [
        (s.doc_id, ids.tolist(), ls)
        for s, (ids, ls) in zip(samples, tok.encode_samples(samples), strict=True)
    ]
    docs = list(tokenise_samples(tok, samples, seq_len=1_000_000))
    assert all(isinstance(d, TokenisedDoc) for d in docs)
    assert [(d.doc_id, np.frombuffer(d.ids, "<i4").tolist(), d.loss_start) for d in docs] == expected


def test_sft_samples_over_the_sequence_length_go_to_the_dead_letter(recorded, tok):
    samples = _samples(recorded[:2])
    out = list(tokenise_samples(tok, samples, seq_len=200))
    dead = [o.value.reason for o in out if not isinstance(o, TokenisedDoc)]
    assert dead == ["sft_over_seq_len"] * sum(s.corpus == SFT for s in samples)
    assert [d.corpus for d in out if isinstance(d, TokenisedDoc)] == [CPT, CPT]

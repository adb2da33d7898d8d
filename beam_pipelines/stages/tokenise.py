"""Tokenise: SFT samples (chat template, loss on the final assistant target, and with `--history-loss`
on the observations of its history too) and CPT documents,
with `schemas.chat_tokens.ChatTokenizer` (the tokenizer training and inference share)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import apache_beam as beam

from beam_pipelines import dead_letter
from beam_pipelines.stages.common import Sample, TokenisedDoc
from schemas.chat_tokens import ChatTokenizer

STAGE = "tokenise"


def tokenise_samples(tok: ChatTokenizer, batch: Sequence[Sample], seq_len: int) -> Iterator:
    """`TokenisedDoc`s in batch order, and dead letters (tagged) for SFT samples over `seq_len`."""
    tokens = documents = 0
    for s, (ids, loss_start, history_spans) in zip(batch, tok.encode_samples(batch), strict=True):
        if s.messages is not None and len(ids) > seq_len:
            # the history was trimmed on an estimate; a sample that still overflows would be cut
            dead_letter.count(STAGE, "sft_over_seq_len")
            yield beam.pvalue.TaggedOutput(
                dead_letter.DEAD_LETTER,
                dead_letter.DeadLetter(STAGE, "sft_over_seq_len", f"{len(ids)} tokens", "", s.doc_id),
            )
            continue
        tokens += len(ids)
        documents += 1
        raw = ids.astype("<i4").tobytes()
        yield TokenisedDoc(s.corpus, s.split, s.domain, s.doc_id, raw, loss_start, s.echo, history_spans)
    dead_letter.count(STAGE, "documents", documents)
    dead_letter.count(STAGE, "tokens", tokens)

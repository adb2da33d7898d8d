"""A world model run in-process with llama.cpp (llama-cpp-python): a GGUF file, generated on CPUs.

llama.cpp is the engine users run small models with on CPUs, and several times faster there than
transformers' eager PyTorch (benchmarks/gguf_generation.py measures it). A trained checkpoint becomes a
GGUF file with `python -m training.export gguf`.

The prompt ids come from the Hugging Face tokenizer inside the GGUF (extracted once by transformers and
cached: `schemas.base_files.gguf_tokenizer_dir`) and its chat template, exactly as the
transformers backend and the corpus tokenise them; llama.cpp then only evaluates ids and picks tokens.
So both backends feed a model the same ids and stop at the same end-of-turn id, and a reply is decoded
the same way. One llama.cpp context serves one sequence at a time: concurrent calls take turns.
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Any

import numpy as np

from schemas.base_files import gguf_path, gguf_tokenizer_dir
from training.backends.base import GenerationConfig, WorldModelBackend, cut_at_stop
from training.backends.repetition import DEFAULT_DETECTOR
from training.backends.transformers_local import TransformersBackend, common_prefix
from training.export.to_gguf import read_lineage

# llama.cpp's KV cache is allocated for the whole context up front; past this many tokens of a model's
# trained context it costs memory that world-model prompts (truncated to --context-chars) never use.
DEFAULT_MAX_CONTEXT = 8192
THREADS_ENV = "AGENTWORLD_LLAMA_THREADS"
STOP_TAIL = 32  # tokens decoded to look for a stop string as the reply grows


def _file_digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()[:24]


def _trained_context(path: str) -> int:
    """The context length the GGUF's model was trained for (general.architecture's context_length)."""
    import gguf

    reader = gguf.GGUFReader(path)
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE)
    field = reader.get_field(gguf.Keys.LLM.CONTEXT_LENGTH.format(arch=arch.contents())) if arch else None
    return int(field.contents()) if field is not None else DEFAULT_MAX_CONTEXT


def _threads() -> int:
    """$AGENTWORLD_LLAMA_THREADS, else every core this process may run on. llama.cpp's threads wait for
    each other at every layer: on cores that other work keeps busy, fewer threads are faster (here, 2
    threads on 2 busy cores generated 3-8x slower than 1)."""
    if os.environ.get(THREADS_ENV):
        return int(os.environ[THREADS_ENV])
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class LlamaCppBackend(WorldModelBackend):
    name = "llama.cpp"

    def __init__(
        self,
        spec: str | os.PathLike[str],
        *,
        max_context: int | None = None,
        n_threads: int | None = None,
    ) -> None:
        """`spec`: a GGUF file or a built-in base name (schemas.base_files.BUILTIN_GGUF).
        `max_context`: prompt plus reply tokens (default: the model's trained context, at most 8192)."""
        from llama_cpp import Llama

        from training.bases import check_fingerprint
        from training.tokenizer import load_tokenizer

        path = gguf_path(os.fspath(spec))
        if path is None:
            raise ValueError(f"{spec!r} is not a GGUF file (*.gguf) or a built-in GGUF base name")
        self.source = path
        tokenizer_dir = gguf_tokenizer_dir(path)
        self.tokenizer = load_tokenizer(tokenizer_dir)
        if self.tokenizer.chat_template is None:
            raise ValueError(f"{path} has no chat template; a world model is queried with chat messages")
        self.n_threads = n_threads or _threads()
        corpus = read_lineage(path).get("corpus.json")
        if corpus is not None:
            # A model served with another tokenizer than its corpus's would be fed ids it never saw.
            check_fingerprint(corpus, tokenizer_dir, corpus.get("corpus", "?"), f"the model {path}")
        self.max_context = max_context or min(_trained_context(path), DEFAULT_MAX_CONTEXT)
        self._llama = Llama(
            model_path=path,
            n_ctx=self.max_context,
            n_threads=self.n_threads,
            n_threads_batch=self.n_threads,
            verbose=False,
        )
        self._digest = _file_digest(path)
        self._lock = threading.Lock()

    # The prompt is rendered, counted and cut to the context exactly as the transformers backend does
    # (both read only tokenizer and max_context, which this class has with the same meaning).
    _prompt_ids = TransformersBackend._prompt_ids
    count_tokens = TransformersBackend.count_tokens
    truncate = TransformersBackend.truncate

    def complete(self, messages: list[dict], config: GenerationConfig) -> str:
        ids = self._prompt_ids(self.truncate(messages, config.max_new_tokens))
        # A prompt that still does not fit leaves what room there is for the reply.
        room = self.max_context - len(ids)
        if room <= 0:
            raise ValueError(f"the prompt has {len(ids)} tokens, the context {self.max_context}")
        with self._lock:
            tokens = self._generate(ids, config, min(config.max_new_tokens, room))
        # <think> is an ordinary added token in Qwen3, so skipping special tokens keeps the reasoning.
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return cut_at_stop(text, config.stop, config.include_stop)

    def _generate(self, ids: list[int], config: GenerationConfig, limit: int) -> list[int]:
        eos = self.tokenizer.eos_token_id
        self._llama.set_seed(config.seed)
        tokens: list[int] = []
        if limit <= 0:
            return tokens
        # temp 0 is llama.cpp's greedy sampler; top_k 0 and min_p 0 turn its default filters off, so a
        # sampled reply draws from the same distribution as transformers' temperature + top-p.
        for token in self._llama.generate(
            ids, temp=config.temperature, top_p=config.top_p, top_k=0, min_p=0.0, repeat_penalty=1.0
        ):
            if token == eos:
                break
            tokens.append(token)
            if len(tokens) >= limit or self._should_stop(tokens, config):
                break
        return tokens

    def _should_stop(self, tokens: list[int], config: GenerationConfig) -> bool:
        if config.repetition_guard and DEFAULT_DETECTOR.looping(tokens):
            return True
        if config.stop:
            tail = self.tokenizer.decode(tokens[-STOP_TAIL:], skip_special_tokens=True)
            return any(s and s in tail for s in config.stop)
        return False

    # The answer's ids exactly as the transformers backend scores them (its chat-template scaffold before
    # the answer, the answer's text encoded as plain text): both read only tokenizer, _prompt_ids and
    # truncate, which this class has with the same meaning, so the methods are shared rather than copied.
    _scaffold = TransformersBackend._scaffold
    _scored_ids = TransformersBackend._scored_ids

    def log_likelihood(self, prompts: list[list[dict]], answers: list[str]) -> list[tuple[float, int]]:
        """See `WorldModelBackend.log_likelihood`: one pair at a time, in the lexicographic order of their
        ids so that pairs with a common prefix (the turns of one trajectory) follow each other and each
        evaluates only what it does not share with the one before it (as the transformers backend does
        on CPUs); `n_batch` positions per decode call, the vocabulary's log-softmax taken only at the
        positions that predict answer tokens."""
        if len(prompts) != len(answers):
            raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
        rows = [self._scored_ids(m, a) for m, a in zip(prompts, answers, strict=True)]
        scores: list[tuple[float, int]] = [(0.0, 0)] * len(rows)
        llama = self._llama
        with self._lock:
            # Llama.generate keeps its own record of what the KV cache holds (input_ids[:n_tokens]):
            # scoring starts from it and leaves it true, so that a generated turn and the scoring of
            # its verdict (training/simulated_verify.py) each evaluate only what the other did not.
            held = llama.input_ids[: llama.n_tokens].tolist()
            llama.n_tokens = 0  # no record while rows are decoded: a failure leaves a part of one
            llama._requires_eval = True  # the last decode's logits are not generate's to sample from
            try:
                for i in sorted(range(len(rows)), key=lambda i: rows[i][0]):
                    scores[i] = self._answer_nll(*rows[i], held)
                    held = rows[i][0]
            except BaseException:
                llama._ctx.kv_cache_seq_rm(-1, 0, -1)
                raise
            llama.input_ids[: len(held)] = held
            llama.n_tokens = len(held)
        return scores

    def _answer_nll(self, ids: list[int], start: int, cached: list[int]) -> tuple[float, int]:
        if len(ids) > self.max_context:
            raise ValueError(f"{len(ids)} tokens to score, the context holds {self.max_context}")
        llama = self._llama
        # Keep the cache of what `ids` shares with the ids before it, up to the position whose logits
        # predict the first answer token: this pair needs those logits.
        keep = common_prefix(cached, ids, start - 1)
        llama._ctx.kv_cache_seq_rm(-1, keep, -1)
        total = 0.0
        # Llama.eval keeps only the last position's logits unless the whole context was built with
        # logits_all (n_ctx x vocabulary floats); its batch can ask for every position's, chunk by chunk.
        for at in range(keep, len(ids), llama.n_batch):
            chunk = ids[at : at + llama.n_batch]
            llama._batch.set_batch(batch=chunk, n_past=at, logits_all=True)
            llama._ctx.decode(llama._batch)
            # position p predicts token p + 1: the answer ids[start:] come from positions start-1..
            first, last = max(at, start - 1), min(at + len(chunk), len(ids) - 1)
            if first >= last:
                continue
            logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(len(chunk), llama.n_vocab()))
            scored = logits[first - at : last - at].astype(np.float64)
            peak = scored.max(axis=1)
            log_norm = peak + np.log(np.exp(scored - peak[:, None]).sum(axis=1))
            targets = np.asarray(ids[first + 1 : last + 1])
            total += float((log_norm - scored[np.arange(len(targets)), targets]).sum())
        return total, len(ids) - start

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.source,
            # A GGUF exported again under the same name is another model: the cache must tell them apart.
            "sha256_24": self._digest,
            "max_context": self.max_context,
        }

    def close(self) -> None:
        """Free the model and its context (llama.cpp memory, not Python's)."""
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None  # type: ignore[assignment]

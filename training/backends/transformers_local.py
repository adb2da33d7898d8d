"""A world model run in-process with `transformers`: a checkpoint directory, a named config or a model.

The prompt is the tokenizer's own chat template with the generation prompt added, so a checkpoint trained
on our SFT samples is queried exactly as it was trained. `generate` is not safe to overlap on one model,
so one worker thread runs it; concurrent calls (fidelity's thread pool) are batched into one left-padded
`generate` by `batching.DynamicBatcher`, which is what makes concurrency pay on one model. A reply does
not depend on the batch it ran in: greedy rows are independent, and sampled rows draw from their own
generator seeded from the request's config.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import (
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    StoppingCriteria,
    StoppingCriteriaList,
    TopPLogitsWarper,
)

from schemas.render import record_messages, split_chat
from training.backends.base import GenerationConfig, WorldModelBackend, cut_at_stop
from training.backends.batching import DynamicBatcher
from training.backends.repetition import DEFAULT_DETECTOR


def _as_record(messages: list[dict]) -> dict[str, Any] | None:
    """The AgentWorldBench record behind render-shaped messages (system, (user, assistant)*, user)."""
    parts = split_chat(messages)
    if parts is None:
        return None
    system, turns, action = parts
    prompts = [*(p for p, _ in turns), action]
    # record_messages never reads the current turn's response (the reference); "" stands in for it.
    return {
        "system_str": system,
        "prompt": prompts,
        "response": [*(r for _, r in turns), ""],
        "current_prompt": action,
        "turn_idx": len(prompts),
        "total_turns": len(prompts),
    }


def _resolve_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None:
        # bf16 halves memory and is what GPUs are fast at; CPUs are faster and exact in fp32.
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    found = getattr(torch, dtype, None)
    if not isinstance(found, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}; use e.g. 'float32' or 'bfloat16'")
    return found


def _load(
    spec: str, tokenizer: PreTrainedTokenizerBase | None, dtype: torch.dtype, device: str
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    from training.bases import check_fingerprint, resolve_base, trained_corpus
    from training.models import build_model
    from training.tokenizer import has_tokenizer, load_tokenizer

    resolved = resolve_base(spec)
    model = build_model(resolved, dtype=dtype, device=device)
    if tokenizer is None:
        tokenizer = load_tokenizer(resolved if has_tokenizer(resolved) else None)
    corpus = trained_corpus(resolved) if os.path.isdir(resolved) else None
    if corpus is not None and has_tokenizer(tokenizer.name_or_path):
        # A checkpoint served with another tokenizer than its corpus's would be fed ids it never saw.
        check_fingerprint(corpus, tokenizer.name_or_path, corpus["corpus"], f"the model {spec}")
    return model, tokenizer


# Answer positions whose vocabulary logits exist at once: bounds a long answer's memory (a 2,000-token
# observation over Qwen3's 152k vocabulary would be 1.2 GB of float32 logits in one piece).
_HEAD_CHUNK = 256


def _length_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices of `lengths` sorted by length, cut into batches whose padded size (rows x longest)
    stays within `max_tokens`; a longer sequence gets a batch of its own."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if batches and (len(batches[-1]) + 1) * lengths[i] <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """How many leading ids `a` and `b` share, at most `limit`."""
    n = min(len(a), len(b), limit)
    for i in range(n):
        if a[i] != b[i]:
            return i
    return max(n, 0)


def _cache_keyword(decoder: torch.nn.Module) -> str:
    """The decoder's name for its KV-cache argument: `cache` since transformers 5.x renamed
    `past_key_values`, which still works there with a deprecation warning."""
    return "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"


@dataclass(frozen=True)
class _Prompt:
    ids: list[int]
    config: GenerationConfig


class _SeededSampler(LogitsProcessor):
    """Temperature and top-p sampling with one generator per row, seeded from the request's config.

    `generate`'s own sampling draws every row from the global generator, so a sampled reply would depend
    on its batch-mates; here it is the same alone or in any batch. It returns scores that are -inf except
    at the drawn token, so greedy selection (do_sample=False) takes exactly that token.
    """

    def __init__(self, rows: int, config: GenerationConfig, device: str) -> None:
        self.temperature = config.temperature
        self.top_p = TopPLogitsWarper(config.top_p) if config.top_p < 1 else None
        self.generators = [torch.Generator(device=device).manual_seed(config.seed) for _ in range(rows)]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = scores / self.temperature
        if self.top_p is not None:
            scores = self.top_p(input_ids, scores)
        probs = scores.softmax(dim=-1)
        drawn = torch.stack(
            [torch.multinomial(p, 1, generator=g) for p, g in zip(probs, self.generators, strict=True)]
        )
        return torch.full_like(scores, float("-inf")).scatter_(1, drawn, 0.0)


class _LoopStop(StoppingCriteria):
    """The repetition guard (GenerationConfig.repetition_guard), row by row, on the reply tokens only."""

    def __init__(self, prompt_width: int) -> None:
        self.prompt_width = prompt_width

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any
    ) -> torch.BoolTensor:
        tails = input_ids[:, self.prompt_width :][:, -DEFAULT_DETECTOR.window :].tolist()
        return torch.tensor([DEFAULT_DETECTOR.looping(t) for t in tails], device=input_ids.device)


class TransformersBackend(WorldModelBackend):
    name = "transformers"

    def __init__(
        self,
        model_or_path: str | os.PathLike[str] | PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase | None = None,
        *,
        device: str = "cpu",
        dtype: str | torch.dtype | None = None,
        max_context: int | None = None,
        max_batch: int = 16,
        batch_wait_ms: float = 50.0,
    ) -> None:
        self.device = device
        self.dtype = _resolve_dtype(dtype, device)
        if isinstance(model_or_path, str | os.PathLike):
            self.source = os.fspath(model_or_path)
            model, tokenizer = _load(self.source, tokenizer, self.dtype, device)
        else:
            model = model_or_path
            self.source = getattr(model.config, "name_or_path", "") or type(model).__name__
            if tokenizer is None:
                from training.tokenizer import load_tokenizer

                tokenizer = load_tokenizer()
        if tokenizer.chat_template is None:
            raise ValueError(
                "the tokenizer has no chat template; a world model is queried with chat messages"
            )
        self.model = model.to(device=device, dtype=self.dtype).eval()
        self.tokenizer = tokenizer
        self.max_context = max_context
        pad = tokenizer.pad_token_id
        self._pad_id = pad if pad is not None else tokenizer.eos_token_id
        # The wait ends once the callers answered last are back, so it costs a lone caller nothing; 50 ms
        # lets a 16-thread pool render and tokenise its next prompts (tens of ms on 2 cores) and fill a batch.
        self._batcher: DynamicBatcher[_Prompt, str] = DynamicBatcher(
            self._generate, max_batch=max_batch, wait_s=batch_wait_ms / 1000, name="transformers-generate"
        )

    def _prompt_ids(self, messages: list[dict]) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        # The template already holds every special token the model expects.
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def count_tokens(self, messages: list[dict]) -> int:
        """Prompt tokens of `messages` under the chat template, generation prompt included."""
        return len(self._prompt_ids(messages))

    def truncate(self, messages: list[dict], max_new_tokens: int) -> list[dict]:
        """Drop the oldest turns until prompt + reply fit `max_context` (None: no limit); system and current
        action stay."""
        if self.max_context is None:
            return messages
        budget = self.max_context - max_new_tokens
        record = _as_record(messages)
        if record is None or self.count_tokens(messages) <= budget:
            return messages
        return record_messages(record, fits=lambda m: self.count_tokens(m) <= budget)

    def complete(self, messages: list[dict], config: GenerationConfig) -> str:
        # Truncating and tokenising in the caller's thread overlaps them with the worker's generate.
        ids = self._prompt_ids(self.truncate(messages, config.max_new_tokens))
        # Only requests with equal configs share a batch: one generate call takes one config.
        return self._batcher.submit(_Prompt(ids, config), key=config)

    def _scaffold(self, messages: list[dict], answer: str) -> str:
        """What the chat template writes between the generation prompt and a final assistant answer's
        content (Qwen3: an empty think block; most templates: nothing): training saw it there."""
        prompt = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        full = self.tokenizer.apply_chat_template(
            [*messages, {"role": "assistant", "content": answer}], tokenize=False
        )
        rest = full[len(prompt) :] if full.startswith(prompt) else ""
        at = rest.find(answer)
        return rest[:at] if at > 0 else ""

    def _scored_ids(self, messages: list[dict], answer: str) -> tuple[list[int], int]:
        """(context + answer ids, where the answer starts)."""
        # The training corpus encodes the answer's text as plain text: control-token text inside a
        # captured screen is not a control token (schemas.chat_tokens).
        answer_ids = self.tokenizer(answer, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        scaffold = self._scaffold(messages, answer)
        scaffold_ids = self.tokenizer(scaffold, add_special_tokens=False)["input_ids"] if scaffold else []
        context = self._prompt_ids(self.truncate(messages, len(scaffold_ids) + len(answer_ids)))
        context += scaffold_ids
        return context + answer_ids, len(context)

    def log_likelihood(
        self, prompts: list[list[dict]], answers: list[str], *, max_batch_tokens: int = 8192
    ) -> list[tuple[float, int]]:
        """See `WorldModelBackend.log_likelihood`. On a GPU, pairs run sorted by length in right-padded
        batches of at most `max_batch_tokens` padded tokens; right padding leaves every real token the
        positions and the causal context it has alone, so a score does not depend on its batch. On a CPU a
        batch buys nothing per token, while the turns of one trajectory share most of their context, so
        pairs run one at a time, each reusing the KV cache of what it shares with the pair before it
        (`_shared_prefix_nll`). Logits are the output embedding of the decoder's last hidden state (the
        Llama/Qwen families), computed for answer positions only. Safe beside `complete`: it keeps no
        state between calls."""
        if len(prompts) != len(answers):
            raise ValueError(f"{len(prompts)} prompts but {len(answers)} answers")
        rows = [self._scored_ids(m, a) for m, a in zip(prompts, answers, strict=True)]
        if self.device == "cpu":
            return self._shared_prefix_nll(rows)
        scores: list[tuple[float, int]] = [(0.0, 0)] * len(rows)
        for batch in _length_batches([len(ids) for ids, _ in rows], max_batch_tokens):
            for i, score in zip(batch, self._answer_nll([rows[i] for i in batch]), strict=True):
                scores[i] = score
        return scores

    def _answer_nll(self, rows: list[tuple[list[int], int]]) -> list[tuple[float, int]]:
        width = max(len(ids) for ids, _ in rows)
        input_ids = torch.full((len(rows), width), self._pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, (ids, _) in enumerate(rows):
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention_mask[row, : len(ids)] = 1
        input_ids = input_ids.to(self.device)
        with torch.inference_mode():
            hidden = self.model.get_decoder()(
                input_ids=input_ids, attention_mask=attention_mask.to(self.device), use_cache=False
            ).last_hidden_state
            return [self._answer_sum(hidden[row], ids, start, 0) for row, (ids, start) in enumerate(rows)]

    def _shared_prefix_nll(self, rows: list[tuple[list[int], int]]) -> list[tuple[float, int]]:
        """One pair at a time, in the lexicographic order of their ids, which puts pairs with a common
        prefix next to each other (turn k's context is turn k-1's context plus its answer and the next
        action). Each pair computes only the positions after what it shares with the pair before it:
        on held-out trajectories about half the tokens (benchmarks/world_model.py). The KV cache is cut
        back to the shared part, never past the position whose hidden state predicts the first answer
        token, which the pair needs."""
        from transformers import DynamicCache

        decoder = self.model.get_decoder()
        scores: list[tuple[float, int]] = [(0.0, 0)] * len(rows)
        cache, cached = DynamicCache(), []
        with torch.inference_mode():
            for i in sorted(range(len(rows)), key=lambda i: rows[i][0]):
                ids, start = rows[i]
                keep = common_prefix(cached, ids, start - 1)
                if not keep:
                    cache = DynamicCache()
                elif keep < cache.get_seq_length():
                    cache.crop(keep - cache.get_seq_length())  # negative: drop that many from the end
                hidden = decoder(
                    input_ids=torch.tensor([ids[keep:]], device=self.device),
                    use_cache=True,
                    **{_cache_keyword(decoder): cache},
                ).last_hidden_state[0]
                scores[i], cached = self._answer_sum(hidden, ids, start, keep), ids
        return scores

    def _answer_sum(self, hidden: torch.Tensor, ids: list[int], start: int, offset: int) -> tuple[float, int]:
        """(the answer's total NLL, its tokens) from the hidden states of positions offset.. of `ids`."""
        head = self.model.get_output_embeddings()
        targets = torch.tensor(ids, device=hidden.device)
        total = 0.0
        # position p predicts token p + 1: the answer ids[start:] come from positions start-1..
        for at in range(start - 1, len(ids) - 1, _HEAD_CHUNK):
            end = min(at + _HEAD_CHUNK, len(ids) - 1)
            logits = head(hidden[at - offset : end - offset]).float()
            total += F.cross_entropy(logits, targets[at + 1 : end + 1], reduction="sum").item()
        return total, len(ids) - start

    @property
    def batch_stats(self) -> dict:
        """How the requests so far were batched (batches, requests, largest, mean size)."""
        return self._batcher.stats.as_dict()

    def _generate(self, batch: Sequence[_Prompt]) -> list[str]:
        """One left-padded `generate` for prompts that share a config; runs in the batcher's worker."""
        config = batch[0].config
        width = max(len(p.ids) for p in batch)
        input_ids = torch.full((len(batch), width), self._pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, prompt in enumerate(batch):
            # Left padding puts every row's next token in the last column; generate derives the position
            # ids from the attention mask, so a padded row sees the positions it would see alone.
            input_ids[row, width - len(prompt.ids) :] = torch.tensor(prompt.ids)
            attention_mask[row, width - len(prompt.ids) :] = 1
        # Override sampling defaults a checkpoint's generation_config may carry; sampling, when asked
        # for, is done by _SeededSampler so that it does not depend on the batch.
        options: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if config.temperature > 0:
            options["logits_processor"] = LogitsProcessorList(
                [_SeededSampler(len(batch), config, self.device)]
            )
        if config.stop:
            options.update(stop_strings=list(config.stop), tokenizer=self.tokenizer)
        if config.repetition_guard:
            options["stopping_criteria"] = StoppingCriteriaList([_LoopStop(width)])
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                max_new_tokens=config.max_new_tokens,
                # Training configs turn the KV cache off; without it each new token recomputes the prompt.
                use_cache=True,
                pad_token_id=self._pad_id,
                eos_token_id=self.tokenizer.eos_token_id,
                **options,
            )
        replies = []
        for tokens in output[:, width:].tolist():
            # A row that finished early is padded to the longest one; its reply ends at its own EOS.
            if self.tokenizer.eos_token_id in tokens:
                tokens = tokens[: tokens.index(self.tokenizer.eos_token_id)]
            # <think> is an ordinary added token in Qwen3, so skipping special tokens keeps the reasoning.
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            replies.append(cut_at_stop(text, config.stop, config.include_stop))
        return replies

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "model": self.source,
            "architecture": type(self.model).__name__,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "device": self.device,
            "dtype": str(self.dtype).removeprefix("torch."),
            "max_context": self.max_context,
        }

    def close(self) -> None:
        """Finish the running batch, fail queued calls with `BatcherClosed`, then drop the weights."""
        self._batcher.close()
        self.model = None  # type: ignore[assignment]

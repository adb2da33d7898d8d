"""Decoding that ends: per-domain reply bounds from the corpus, and the repetition guard.

One fixed bound either cuts long observations (android, os and search ones run to 600-1,800 tokens) or
lets every looping reply run that long. The corpus knows better: its manifest records, per domain, the
95th percentile of the SFT answers' lengths in tokens (`target_tokens_p95`, beam_pipelines' write
stage). A domain's bound is that with a quarter's headroom; a domain the corpus does not cover keeps
`--max-new-tokens`. The bounds are read from the --held-out corpus, else from the corpus the model
was trained on (its checkpoint's corpus.json, or the `agentworld.corpus` key of an exported GGUF).
The bounds are answer lengths in that corpus's target form: a system answering in the other form (the
base of a delta model answers in full) keeps `--max-new-tokens`.

Every reply ends at its first </predicted_observation> (kept): the answer format allows nothing after it,
and a model that has not learnt the format otherwise writes the closing tag again and again to its bound.

The repetition guard stops a reply whose tail loops (training/backends/repetition.py); the in-process
backends (transformers, llama.cpp) honour it, an OpenAI-compatible server is only sent the bound.
"""

from __future__ import annotations

import argparse
import json
import math
import os

import fsspec

from training.backends.base import GenerationConfig, ending_at_answer

MANIFEST_KEY = "target_tokens_p95"
HEADROOM = 1.25  # a reply a bit longer than 95% of the training answers still ends on its own


def add_decoding_args(p: argparse.ArgumentParser) -> None:
    """--reply-bounds and --repetition-guard (beside the parser's own --max-new-tokens)."""
    p.add_argument(
        "--reply-bounds",
        choices=("corpus", "fixed"),
        default="corpus",
        help="corpus: per domain, 1.25 x the corpus's 95th-percentile answer length in tokens (manifest "
        f"{MANIFEST_KEY}; of --held-out, else of the model's training corpus), --max-new-tokens for other "
        "domains; fixed: --max-new-tokens everywhere",
    )
    p.add_argument(
        "--repetition-guard",
        choices=("on", "off"),
        default="on",
        help="on: stop a reply once its tail repeats one block of tokens (3+ copies over 128+ tokens); "
        "such a reply keeps what it had, as at the token bound. In-process models only (checkpoints, GGUF "
        "files): a server's replies run to their bound",
    )


def corpus_reply_bounds(corpus: str) -> tuple[str, dict[str, int]]:
    """The target form of `corpus` (its root or a corpus folder in it) and, per domain, the reply
    bound from its manifest; no bounds when the manifest does not record the answer lengths (a corpus
    built before they were)."""
    fs, root = fsspec.core.url_to_fs(corpus)
    root = root.rstrip("/")
    for folder in (root, root.rsplit("/", 1)[0]):
        if fs.exists(f"{folder}/manifest.json"):
            manifest = json.loads(fs.cat_file(f"{folder}/manifest.json"))
            p95 = manifest.get(MANIFEST_KEY) or {}
            form = manifest.get("config", {}).get("target", "full")
            return form, {domain: math.ceil(n * HEADROOM) for domain, n in p95.items() if n > 0}
    return "full", {}


def trained_on(model: str) -> str | None:
    """The corpus a model was trained on, as its lineage records it (None: not recorded, or a URL)."""
    from training.bases import trained_corpus
    from training.models import resolve_checkpoint

    if model.endswith(".gguf") and os.path.isfile(model):
        from training.export.to_gguf import read_lineage

        recorded = read_lineage(model).get("corpus.json")
    elif os.path.isdir(model):
        recorded = trained_corpus(resolve_checkpoint(model))
    else:
        recorded = None
    return recorded.get("corpus") if recorded else None


def decoding_config(args: argparse.Namespace) -> GenerationConfig:
    """The generation config of `python -m training.fidelity` from its arguments (see add_decoding_args)."""
    form, bounds = "full", {}
    if args.reply_bounds == "corpus":
        source = args.held_out or trained_on(args.model)
        form, bounds = corpus_reply_bounds(source) if source else ("full", {})
    config = GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        repetition_guard=args.repetition_guard == "on",
        max_new_tokens_by_domain=tuple(sorted(bounds.items())),
        bounds_form=form,
    )
    return ending_at_answer(config)

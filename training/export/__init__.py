"""Exports of a trained world model for the engines users run it with.

`python -m training.export gguf CKPT OUT.gguf` writes a transformers checkpoint as GGUF, llama.cpp's
format, so that a model trained here generates on CPUs with llama.cpp (`training.backends` runs a
`.gguf` file in-process; `llama_cpp.server` serves one over HTTP). See `to_gguf.export_gguf`.
"""

from training.export.to_gguf import EXPORT_TYPES, ExportError, export_gguf

__all__ = ["EXPORT_TYPES", "ExportError", "export_gguf"]

"""Exports of a finished corpus (build_corpus output) for other toolchains: `megatron` (Megatron-LM
indexed datasets) and `hub` (a Hugging Face Hub dataset folder).
See `python -m beam_pipelines.exports --help`.
"""

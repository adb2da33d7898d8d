"""python -m training.export: write a trained checkpoint in the format of another engine."""

from __future__ import annotations

import argparse
import sys

from training.export.to_gguf import DEFAULT_PRE_TOKENIZER, EXPORT_TYPES, ExportError, export_gguf

EXAMPLES = """examples:
  # the demo's fine-tuned model (its latest checkpoint), for llama.cpp
  python -m training.export gguf out/demo/model out/demo/model.gguf
  # a given checkpoint, quantised to 8 bits (about half the size of f16, a little less exact)
  python -m training.export gguf runs/sft/checkpoint-000200 sft-q8.gguf --type q8_0
  # then: generate with it in-process, or serve it over HTTP
  python -m training.fidelity --real out/demo/raw --model out/demo/model.gguf --out fid
  python -m llama_cpp.server --model out/demo/model.gguf --chat_format chatml"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m training.export",
        description="Export a trained checkpoint for another inference engine.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    formats = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
    g = formats.add_parser(
        "gguf",
        help="GGUF for llama.cpp (LLaMA-architecture checkpoints such as fine-tuned SmolLM2)",
        description="Write CKPT as a GGUF file: weights, hyperparameters, tokenizer, chat template.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument("checkpoint", metavar="CKPT", help="checkpoint directory, or a training run (its latest)")
    g.add_argument("out", metavar="OUT.gguf", help="the file to write (replaced if it exists)")
    g.add_argument("--type", default="f16", choices=EXPORT_TYPES, help="weight type of 2-D tensors (f16)")
    g.add_argument(
        "--pre-tokenizer",
        default=DEFAULT_PRE_TOKENIZER,
        help="llama.cpp's name for the tokenizer's pre-tokenizer (SmolLM2: smollm); the export checks it",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        path = export_gguf(args.checkpoint, args.out, out_type=args.type, pre_tokenizer=args.pre_tokenizer)
    except (ExportError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB, {args.type})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

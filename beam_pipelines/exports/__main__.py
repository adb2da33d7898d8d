"""`python -m beam_pipelines.exports {megatron,hub} --corpus OUT --out DIR ...` (see `--help`)."""

from __future__ import annotations

import argparse
import sys

from beam_pipelines.exports.common import ExportError
from schemas.cli import command_parser, subcommands

EXAMPLES = """\
examples:
  # Megatron-LM indexed datasets (.bin/.idx) of the CPT and SFT token shards, every split
  python -m beam_pipelines.exports megatron --corpus out/corpus --out out/megatron

  # only CPT, only train and validation; replace an earlier export
  python -m beam_pipelines.exports megatron --corpus out/corpus --out out/megatron \\
      --corpora cpt --splits train,validation --overwrite

  # a Hugging Face Hub dataset folder (Parquet per config and split, README.md dataset card)
  python -m beam_pipelines.exports hub --corpus out/corpus --out out/hub --name my-org/agentworld-corpus
  huggingface-cli upload my-org/agentworld-corpus out/hub --repo-type dataset
"""


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("give a positive number")
    return value


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "python -m beam_pipelines.exports",
        "Export a corpus written by `python -m beam_pipelines.build_corpus` for Megatron-LM "
        "or the Hugging Face Hub. Reads OUT/manifest.json; streams, so memory does not grow with the corpus.",
        EXAMPLES,
    )
    commands = subcommands(p, metavar="{megatron,hub}")

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--corpus", required=True, help="the build_corpus output (path or URI)")
        sub.add_argument("--out", required=True, help="the folder to write (path or URI); must be empty")
        sub.add_argument("--overwrite", action="store_true", help="empty a non-empty --out first")
        sub.add_argument("--no-progress", action="store_true", help="no progress bar")

    m = commands.add_parser("megatron", help="Megatron-LM indexed datasets (.bin/.idx) of the token corpora")
    common(m)
    m.add_argument(
        "--corpora", type=_names, help="token corpora to export, comma-separated (default: cpt,sft)"
    )
    m.add_argument(
        "--splits", type=_names, help="splits, comma-separated (default: every split the corpus has)"
    )
    m.add_argument(
        "--vocab-size",
        type=_positive,
        help="the tokenizer's vocabulary size, for the token dtype (default: the largest token id + 1)",
    )

    h = commands.add_parser(
        "hub", help="a Hugging Face Hub dataset folder: Parquet per config and split plus a README.md card"
    )
    common(h)
    h.add_argument("--name", help="the dataset's name on the Hub, e.g. my-org/agentworld-corpus")
    h.add_argument(
        "--corpora",
        type=_names,
        help="configs to export, comma-separated (default: every one the corpus has of "
        "cpt,sft,rl,agentworldbench)",
    )
    h.add_argument(
        "--captured-license",
        help="the licence (a Hub licence id such as apache-2.0) of the trajectories our own collectors "
        "captured; without it they count as 'other'",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # recorded in export.json and the dataset card
    args.command_line = ["python", "-m", "beam_pipelines.exports", *(sys.argv[1:] if argv is None else argv)]
    try:
        if args.command == "megatron":
            from beam_pipelines.exports.megatron import main_megatron

            return main_megatron(args)
        from beam_pipelines.exports.hub import main_hub

        return main_hub(args)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

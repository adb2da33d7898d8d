"""Command-line options that the training runs (`training.loop` for CPT/SFT, `training.rl`) declare
alike, so that their names, defaults and help cannot drift apart."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from training.bases import SKIP_CHECK_FLAG


def add_config_options(
    parser: argparse.ArgumentParser, defaults: object, fields: Sequence[tuple[str, type, str]]
) -> None:
    """One `--kebab-name` option a (field, type, help); its default is read from `defaults`, the run's
    config, so the config stays the one place a default is written."""
    for name, kind, text in fields:
        parser.add_argument(
            f"--{name.replace('_', '-')}", type=kind, default=getattr(defaults, name), help=text
        )


def add_resume_options(parser: argparse.ArgumentParser) -> None:
    """--resume and the tokenizer-check override, which every run into an --out directory takes."""
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    parser.add_argument(
        SKIP_CHECK_FLAG,
        action="store_true",
        help="train on a corpus whose manifest does not name its tokenizer (refused by default)",
    )

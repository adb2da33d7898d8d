"""The argparse set-up every `python -m ...` command of ours shares: a program name, a description
and an examples epilog that argparse prints as written (its default formatter would re-wrap the
example commands into one paragraph). It lives in schemas, the bottom layer, so that every package
may use it.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any


def command_parser(prog: str | None, description: str | None, examples: str) -> argparse.ArgumentParser:
    """The top-level parser of a command; `examples` is its epilog, printed line for line."""
    return argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def subcommands(parser: argparse.ArgumentParser, **options: Any) -> argparse._SubParsersAction:
    """The required subcommands of `parser` (the chosen one's name in `args.command`); each one's
    `--help` ends with the command's examples too, where a user asking about one subcommand looks."""
    with_examples = functools.partial(
        argparse.ArgumentParser, epilog=parser.epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    return parser.add_subparsers(dest="command", required=True, parser_class=with_examples, **options)

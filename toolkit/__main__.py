"""Command line: ``python -m toolkit demo`` and ``python -m toolkit whatif ...``."""

from __future__ import annotations

import argparse
import sys

from toolkit._version import __version__
from toolkit.errors import ToolkitError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m toolkit",
        description="Test tool-using LLM agents by simulation; measure changes with intervals.",
    )
    parser.add_argument("--version", action="version", version=f"toolkit {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    from toolkit import _demo

    _demo.add_arguments(commands.add_parser("demo", help=_demo.HELP, description=_demo.HELP))
    from toolkit.whatif import cli as whatif_cli

    whatif_cli.add_arguments(commands.add_parser("whatif", help=whatif_cli.HELP, description=whatif_cli.HELP))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.run(args) or 0)
    except ToolkitError as error:  # a user's mistake: the message, never a traceback
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

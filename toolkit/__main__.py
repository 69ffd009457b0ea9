"""Command line: ``python -m toolkit demo`` and ``python -m toolkit whatif ...``.

Exit codes are part of the interface (a CI job branches on them), so none can be produced by
accident: 0, 1 and 2 come only from the command itself (for ``whatif fork``: Ship, Don't
Ship, Inconclusive or a setup/user error, which prints one ``error:`` line), and 2 from no
command at all (the help goes to stderr: a script that forgot its command fails); an unexpected
exception is code 3 with one ``internal error:`` line (the traceback too when the
environment variable ``TOOLKIT_DEBUG=1``), never 1, which would read as "Don't Ship"; Ctrl-C
is 130 (the shell's 128 + SIGINT).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from toolkit._version import __version__
from toolkit.errors import ToolkitError

EXIT_INTERNAL_ERROR = 3
EXIT_INTERRUPTED = 130
# One line, whatever the exception holds (a MemoryError from a huge input, a message built
# from user data): enough to recognise the failure, short enough for a CI log line.
_MESSAGE_CHARS = 200


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

    whatif_cli.add_arguments(commands.add_parser(
        "whatif", help=whatif_cli.HELP, description=whatif_cli.HELP, epilog=whatif_cli.EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter))
    return parser


def _one_line(error: BaseException) -> str:
    """``Type: message`` on one line, the message cut to 200 characters."""
    try:
        message = str(error)
    except Exception:  # a __str__ that raises must not replace the error being reported
        message = "(the exception's message could not be rendered)"
    message = " ".join(message.split())
    if len(message) > _MESSAGE_CHARS:
        message = message[:_MESSAGE_CHARS] + f"…({len(message)} chars)"
    name = type(error).__name__
    return f"{name}: {message}" if message else name


def _internal_error(error: BaseException) -> int:
    print(f"internal error: {_one_line(error)}", file=sys.stderr)
    if os.environ.get("TOOLKIT_DEBUG") == "1":
        traceback.print_exception(error, file=sys.stderr)
    else:
        print("  this is a bug in toolkit or in code it called, not a verdict (exit 3); please report it "
              "with the command line and the output of a rerun with TOOLKIT_DEBUG=1", file=sys.stderr)
    return EXIT_INTERNAL_ERROR


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code (see the module docstring).

    Parameters
    ----------
    argv : list of str, optional
        The arguments after ``python -m toolkit``; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0, 1 or 2 from the command, 2 for a ToolkitError (a user's mistake) and for no
        command at all (the help is printed to stderr), 3 for any other exception, 130 for
        KeyboardInterrupt. Only argparse itself may still raise
        SystemExit (2 for a bad command line, 0 for ``--help``).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        # no command is a usage error, like a bad one: exit 2 (a script that forgot its
        # command must not pass), and the help on stderr as argparse prints its usage
        parser.print_help(sys.stderr)
        return 2
    try:
        code = args.run(args)
        return int(code or 0)
    except ToolkitError as error:  # a user's mistake: the message, never a traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as error:
        # sys.exit() called by user code the command imported (a runner, a scorer): its code
        # (often 1) would pass for a verdict, so it is reported as what it is
        return _internal_error(RuntimeError(f"sys.exit({error.code!r}) was called while the command ran"))
    except BaseException as error:  # RecursionError, MemoryError, a bug: never exit 1
        return _internal_error(error)


if __name__ == "__main__":
    sys.exit(main())

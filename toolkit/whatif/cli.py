"""``python -m toolkit whatif fork|diff|validate|init``.

Exit codes: 0 Ship, 1 Don't Ship, 2 Inconclusive or any setup failure (bad config, unloadable
runner or scorer, unreadable source, unwritable report), 3 internal error (an unexpected
exception: a bug in toolkit or in code it called, never a verdict; ``TOOLKIT_DEBUG=1`` shows the
traceback), 130 interrupted. User errors print one message, no traceback (``toolkit.__main__``
prints ToolkitError; this module turns OS errors on writing into ToolkitError).

``whatif init [PATH] [--force]`` writes a commented example config (default
``whatif.config.yaml``) and the small trace file it reads; the pair validates and runs offline
(:func:`toolkit.whatif.examples.write_example`).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys

from toolkit.errors import ReportWriteError
from toolkit.whatif._pipeline import fork
from toolkit.whatif.config import load_config
from toolkit.whatif.report import diff

__all__ = ["HELP", "EXIT_CODES", "add_arguments"]

HELP = "Replay recorded traces under a change and decide Ship / Don't Ship / Inconclusive."
EXIT_CODES = """exit codes:
  0    Ship
  1    Don't Ship
  2    Inconclusive, or a setup/user error (bad config, unloadable runner or scorer, unreadable source)
  3    internal error: an unexpected exception, never a verdict (report it; TOOLKIT_DEBUG=1 shows the traceback)
  130  interrupted (Ctrl-C)"""


def _fork(args) -> int:
    verdict = fork(args.config, profile=args.profile, allow_stub=args.allow_stub)
    stamp = _dt.date.today().isoformat()
    json_path = args.output_json or f"reports/whatif-fork-{stamp}.json"
    md_path = args.output_md or f"reports/whatif-fork-{stamp}.md"
    try:
        written = verdict.write(json_path, md_path)
    except (OSError, ValueError) as error:  # ValueError: a NUL in a path, text no encoding takes
        raise ReportWriteError(f"failed to write the report artifacts: {type(error).__name__}: {error}") from None
    if args.print_paths:
        print(json.dumps({**{k: written.get(k) for k in ("report_json", "report_md")}, "verdict": verdict.state}, sort_keys=True))
    else:
        print(verdict.status_line())
        for path in written.values():
            print(f"  wrote {path}")
    return verdict.exit_code


def _diff(args) -> int:
    result = diff(args.before, args.after)
    sys.stdout.write(result.to_markdown())
    return 0


def _validate(args) -> int:
    config = load_config(args.config)
    required = ", ".join(("failure", "baseline") if config.experiment_shape == "failure_rescue" and config.decision.require_baseline
                         else ("failure",) if config.experiment_shape == "failure_rescue" else ("baseline",))
    print(f"ok: {args.config} is a valid what-if config ({config.experiment_shape}; required cohorts: {required}; "
          f"config sha256 {config.config_hash()[:16]})")
    return 0


def _init(args) -> int:
    from toolkit.whatif.examples import write_example

    written = write_example(args.path, force=args.force)
    for path in written:
        print(f"wrote {path}")
    print(f"next: python -m toolkit whatif validate {written[0]}")
    print(f"      python -m toolkit whatif fork --config {written[0]}")
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``fork``, ``diff``, ``validate`` and ``init`` sub-commands to ``parser``."""
    commands = parser.add_subparsers(dest="whatif_command", metavar="SUBCOMMAND")
    parser.set_defaults(run=lambda args: (parser.print_help(), 2)[1])
    raw = argparse.RawDescriptionHelpFormatter

    fork = commands.add_parser("fork", help="run an experiment from a config file", epilog=EXIT_CODES, formatter_class=raw,
                               description="Replay the configured cohorts under the change and write the verdict.")
    fork.add_argument("--config", "-c", default="whatif.config.yaml", help="YAML or JSON config (default: %(default)s)")
    fork.add_argument("--profile", "-p", default=None, choices=("default", "review", "minimal", "forensic"),
                      help="reporting profile; 'forensic' also needs the config's acknowledgment block")
    fork.add_argument("--allow-stub", action="store_true",
                      help="let a run that used the stub source or the stub scorer Ship (without it such a run never exits 0)")
    fork.add_argument("--output-json", default=None, help="JSON report path (default reports/whatif-fork-<date>.json)")
    fork.add_argument("--output-md", default=None, help="Markdown report path (default reports/whatif-fork-<date>.md)")
    fork.add_argument("--print-paths", action="store_true", help="print one JSON object {report_json, report_md, verdict}")
    fork.set_defaults(run=_fork)

    compare = commands.add_parser("diff", help="compare two JSON reports", description="What changed between two reports.",
                                  epilog="exit codes: 0 compared, 2 a report is missing or unreadable, 3 internal error",
                                  formatter_class=raw)
    compare.add_argument("before")
    compare.add_argument("after")
    compare.set_defaults(run=_diff)

    check = commands.add_parser("validate", help="check a config file", description="Validate a config without running it.",
                                epilog="exit codes: 0 valid, 2 invalid (every problem listed), 3 internal error",
                                formatter_class=raw)
    check.add_argument("config")
    check.set_defaults(run=_validate)

    start = commands.add_parser(
        "init", help="write a commented example config that runs offline", formatter_class=raw,
        description="Write a commented example config and the small trace file it reads (next to it); "
                    "it validates and runs offline with the example agent and scorer of toolkit.whatif.examples.",
        epilog="exit codes: 0 written, 2 a file exists (use --force) or cannot be written, 3 internal error")
    start.add_argument("path", nargs="?", default="whatif.config.yaml", help="config to write (default: %(default)s)")
    start.add_argument("--force", action="store_true", help="overwrite the config and its trace file if they exist")
    start.set_defaults(run=_init)

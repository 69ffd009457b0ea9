"""``python -m toolkit whatif fork|diff|validate``.

Exit codes: 0 Ship, 1 Don't Ship, 2 Inconclusive or any setup failure (bad config, unloadable
runner or scorer, unreadable source, unwritable report). User errors print one message, no
traceback (``toolkit.__main__`` prints ToolkitError; this module turns OS errors on writing
into ToolkitError).
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

__all__ = ["HELP", "add_arguments"]

HELP = "Replay recorded traces under a change and decide Ship / Don't Ship / Inconclusive."


def _fork(args) -> int:
    verdict = fork(args.config, profile=args.profile)
    stamp = _dt.date.today().isoformat()
    json_path = args.output_json or f"reports/whatif-fork-{stamp}.json"
    md_path = args.output_md or f"reports/whatif-fork-{stamp}.md"
    try:
        written = verdict.write(json_path, md_path)
    except OSError as error:
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Attach the ``fork``, ``diff`` and ``validate`` sub-commands to ``parser``."""
    commands = parser.add_subparsers(dest="whatif_command", metavar="SUBCOMMAND")
    parser.set_defaults(run=lambda args: (parser.print_help(), 2)[1])

    fork = commands.add_parser("fork", help="run an experiment from a config file",
                               description="Replay the configured cohorts under the change and write the verdict.")
    fork.add_argument("--config", "-c", default="whatif.config.yaml", help="YAML or JSON config (default: %(default)s)")
    fork.add_argument("--profile", "-p", default=None, choices=("default", "review", "minimal", "forensic"),
                      help="reporting profile; 'forensic' also needs the config's acknowledgment block")
    fork.add_argument("--output-json", default=None, help="JSON report path (default reports/whatif-fork-<date>.json)")
    fork.add_argument("--output-md", default=None, help="Markdown report path (default reports/whatif-fork-<date>.md)")
    fork.add_argument("--print-paths", action="store_true", help="print one JSON object {report_json, report_md, verdict}")
    fork.set_defaults(run=_fork)

    compare = commands.add_parser("diff", help="compare two JSON reports", description="What changed between two reports.")
    compare.add_argument("before")
    compare.add_argument("after")
    compare.set_defaults(run=_diff)

    check = commands.add_parser("validate", help="check a config file", description="Validate a config without running it.")
    check.add_argument("config")
    check.set_defaults(run=_validate)

"""Every error class the toolkit raises on purpose, and the one did-you-mean helper.

The tree (a user catches ``ToolkitError`` for all of them; the ``ValueError`` bases let
code that already catches ``ValueError`` keep working)::

    ToolkitError
    ├── ConfigError (ValueError)         a value, keyword or file is invalid
    │   ├── AgentShapeError              an agent's shape cannot be told from its signature
    │   ├── WhatIfConfigError            a what-if config is invalid (.problems, one per line)
    │   └── ForensicAffirmationError     forensic reports asked on one surface only
    ├── KnobError (ValueError)           an engine knob is unknown, mistyped or out of bounds
    ├── RowError (ValueError)            a row breaks the schema, or a rows file is malformed
    ├── SchemaError (ValueError)         a tool schema or other structured input is malformed
    ├── AgentReplyError (TypeError)      an agent callable returned a reply of an impossible type
    ├── BadReply                         a chat agent's reply is not a usable message (.reason)
    ├── BackendError                     a model call failed (.status, .retries, .first_contact)
    ├── LostRollout                      a rollout produced nothing gradable (.reason, .row)
    ├── JudgeError (ValueError)          a judge argument is unusable
    ├── JudgeTrustError                  grade(trust="require") found the judge untrusted (.trust)
    ├── HackScanError (ValueError)       hack_scan got rows it cannot scan
    ├── LogprobError (ValueError)        rows or a reference cannot give the asked logprobs
    ├── ExportError (ValueError)         a training export would be empty or is impossible
    ├── PublishGateError                 RL data that cannot train (.report, .refusals)
    ├── SetupError                       a what-if adapter, runner or scorer cannot be built
    ├── ReportError                      a file is not a readable what-if report
    ├── ReportWriteError                 what-if report files could not be written
    └── DashboardBusy                    Run pressed while a run is still going

Every "unknown name" message (knobs, world options, config keys, factors, simulate()
keywords, row fields) goes through :func:`unknown_name_message`, so the wording and the
suggestion rule are the same everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

__all__ = [
    "ToolkitError",
    "ConfigError",
    "KnobError",
    "RowError",
    "SchemaError",
    "AgentShapeError",
    "WhatIfConfigError",
    "ForensicAffirmationError",
    "AgentReplyError",
    "BadReply",
    "BackendError",
    "LostRollout",
    "JudgeError",
    "JudgeTrustError",
    "HackScanError",
    "LogprobError",
    "ExportError",
    "PublishGateError",
    "SetupError",
    "ReportError",
    "ReportWriteError",
    "DashboardBusy",
    "did_you_mean",
    "unknown_name_message",
]


class ToolkitError(Exception):
    """Base class of every error the toolkit raises for bad user input."""


class ConfigError(ToolkitError, ValueError):
    """A configuration value or file is invalid."""


class KnobError(ToolkitError, ValueError):
    """An engine knob is unknown, of the wrong type or out of its bounds."""


class RowError(ToolkitError, ValueError):
    """A row does not follow the row schema, or a rows file is malformed."""


class SchemaError(ToolkitError, ValueError):
    """A tool schema or other structured input is malformed."""


class AgentShapeError(ConfigError):
    """The shape of an agent callable cannot be told from its signature."""


class WhatIfConfigError(ConfigError):
    """The config file or mapping is invalid; ``problems`` holds one line per error."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = list(problems or [message])


class ForensicAffirmationError(ConfigError):
    """Forensic reporting was asked for on only one of the two required surfaces."""


class AgentReplyError(ToolkitError, TypeError):
    """An agent callable returned a reply whose *type* no reply of its shape can have.

    Raised by :func:`toolkit.run_rollout` on the first such reply (``None``, an int, a list,
    an SDK object, a dict with none of the shape's keys, ...): a bug in the code around the
    model, which every later rollout would repeat, so it is never counted as a lost rollout.
    A reply of the right type whose values are unusable (empty text, tool arguments that are
    not JSON) is a model glitch instead: :class:`BadReply`, a lost and re-rolled rollout.
    ``.shape`` is the agent's shape (``"chat"`` or ``"message"``), ``.got`` the type name of
    what it returned. A ``TypeError`` too, since that is what it is.
    """

    def __init__(self, message: str, *, shape: str | None = None, got: str | None = None) -> None:
        # keyword-only extras: an exception is rebuilt from its message alone when pickled
        # back from a process-pool worker, then its __dict__ is restored
        super().__init__(message)
        self.shape = shape
        self.got = got


class BadReply(ToolkitError):
    """A chat agent returned something that is not a usable assistant message."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class BackendError(ToolkitError):
    """A model call failed: ``.status`` (HTTP status, "timeout", "connection", or "no_models"
    when a bare-URL server lists no model), ``.retries``, and ``.first_contact``: True when
    the server never answered this backend at all (refused, or silent for the whole timeout),
    which a rollout records as lost ``server_unreachable``."""

    def __init__(self, message: str, status: Any = None, retries: int = 0, *, first_contact: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retries = retries
        self.first_contact = first_contact


class LostRollout(ToolkitError):
    """A rollout that produced nothing gradable. ``.reason`` (one of :data:`LOST_REASONS`),
    ``.detail`` (one sentence), ``.row`` (the partial row, ``ended_by="lost"``) and
    ``.exception`` (what the agent raised, if it raised)."""

    def __init__(self, reason: str, detail: str, row: dict | None = None, exception: BaseException | None = None) -> None:
        super().__init__(f"lost rollout ({reason}): {detail}")
        self.reason = reason
        self.detail = detail
        self.row = row
        self.exception = exception


class JudgeError(ToolkitError, ValueError):
    """A judge argument is unusable (not callable, unknown spec, bad option)."""


class JudgeTrustError(ToolkitError):
    """``grade(trust="require")`` found the judge untrusted; ``.trust`` holds the audit."""

    def __init__(self, message: str, trust: Any) -> None:
        super().__init__(message)
        self.trust = trust


class HackScanError(ToolkitError, ValueError):
    """hack_scan was given rows it cannot scan."""


class LogprobError(ToolkitError, ValueError):
    """Rows or a reference cannot give what a logprob function was asked for."""


class ExportError(ToolkitError, ValueError):
    """An export would be empty, or was asked for something it cannot produce."""


class PublishGateError(ToolkitError):
    """RL-shaped data that cannot train; ``.report`` holds the full gate report."""

    def __init__(self, message: str, report: Any) -> None:
        super().__init__(message)
        self.report = report
        self.refusals = list(report.refusals)


class SetupError(ToolkitError):
    """The experiment cannot start: an adapter, runner or scorer could not be built."""


class ReportError(ToolkitError):
    """A report file cannot be read or is not a toolkit what-if report."""


class ReportWriteError(ToolkitError):
    """The report files could not be written."""


class DashboardBusy(ToolkitError):
    """Run was asked while a run is still going; stop it or wait for it first."""


# 0.6 is difflib's own default cutoff; it catches one- and two-letter typos in names of
# eight or more letters without proposing unrelated names for short ones.
_SUGGESTION_CUTOFF = 0.6


def did_you_mean(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` valid names close to ``name`` (best first), possibly empty.

    Parameters
    ----------
    name : str
        The unknown name as given (converted with ``str``).
    candidates : Iterable[str]
        The valid names (each converted with ``str``).
    n : int, default 3
        The most suggestions returned. Closeness is difflib's ratio with cutoff 0.6; when
        nothing passes it, a candidate equal to ``name`` up to case is returned alone.

    Returns
    -------
    list[str]
        The suggestions, best first; empty when none is close.
    """
    pool = [str(c) for c in candidates]
    found = difflib.get_close_matches(str(name), pool, n=n, cutoff=_SUGGESTION_CUTOFF)
    if not found:
        # A case-only difference ("Timeout" for "timeout") scores below the cutoff for
        # short names, yet is the most common typo of all.
        lowered = {c.lower(): c for c in pool}
        if str(name).lower() in lowered:
            found = [lowered[str(name).lower()]]
    return found


def unknown_name_message(kind: str, name: str, candidates: Iterable[str]) -> str:
    """One sentence naming an unknown ``kind`` and the nearest valid names.

    Parameters
    ----------
    kind : str
        What the name is, as the sentence says it (``"knob"``, ``"mode"``, ``"keyword argument"``).
    name : str
        The unknown name; quoted with ``repr`` in the message.
    candidates : Iterable[str]
        The valid names. Up to 3 close ones (:func:`did_you_mean`) are suggested; when none
        is close, the first 12 in sorted order are listed (``...`` when there are more);
        with no candidates the sentence only names the unknown one.

    Returns
    -------
    str
        E.g. ``unknown knob 'patiense'; did you mean 'patience'?``.

    Examples
    --------
    >>> unknown_name_message("knob", "patiense", ["patience", "seed"])
    "unknown knob 'patiense'; did you mean 'patience'?"
    """
    pool = sorted(str(c) for c in candidates)
    close = did_you_mean(name, pool)
    message = f"unknown {kind} {name!r}"
    if close:
        message += "; did you mean " + " or ".join(repr(c) for c in close) + "?"
    elif pool:
        shown = ", ".join(pool[:12]) + (", ..." if len(pool) > 12 else "")
        message += f"; valid names: {shown}"
    return message

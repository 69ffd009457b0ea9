"""The error classes a user can cause, and the one did-you-mean helper behind them.

Every "unknown name" message in the toolkit (knobs, world options, config keys, factors,
simulate() keywords, row fields) goes through :func:`unknown_name_message` so that the
wording and the suggestion rule are the same everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "ToolkitError",
    "ConfigError",
    "KnobError",
    "RowError",
    "SchemaError",
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


# 0.6 is difflib's own default cutoff; it catches one- and two-letter typos in names of
# eight or more letters without proposing unrelated names for short ones.
_SUGGESTION_CUTOFF = 0.6


def did_you_mean(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Return up to ``n`` valid names close to ``name`` (best first), possibly empty."""
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
